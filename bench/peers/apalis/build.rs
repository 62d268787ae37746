// Exposes the apalis version resolved in Cargo.lock as APALIS_VERSION.
fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut lines = lock.lines();
    let mut version = "unknown".to_string();
    while let Some(line) = lines.next() {
        if line == "name = \"apalis\"" {
            if let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = ")) {
                version = v.trim_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo:rustc-env=APALIS_VERSION={version}");
}
