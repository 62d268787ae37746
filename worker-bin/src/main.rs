fn main() {
    jobworker::cli::main()
}
