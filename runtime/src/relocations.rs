//! Giving back the pages of the executable's relocation table.
//!
//! The dynamic loader reads `.rela.dyn` (about 0.9 MB in a release build)
//! once, before `main`, to relocate the binary; Rust binaries are linked
//! with full RELRO (`-z now`), so nothing reads it again. Its pages stay
//! mapped into the process that started, the supervisor, and count in its
//! memory (forked workers never touch them). [`release`] unmaps them with
//! `MADV_DONTNEED`: they are clean pages of a read-only mapping of the
//! file, so anything that touched them again would read them back from the
//! file, and the kernel can reclaim them meanwhile.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

const PAGE: u64 = 4096;

/// Drops the relocation table's whole pages from this process's memory;
/// returns the bytes given back. Best effort: anything unexpected (not a
/// 64-bit little-endian ELF, no `.rela.dyn`, a table outside the first,
/// read-only segment) gives back nothing.
pub(crate) fn release() -> u64 {
    let Some((start, end)) = table_pages() else {
        return 0;
    };
    let Some(addr) = std::ptr::NonNull::new(start as *mut std::ffi::c_void) else {
        return 0;
    };
    // SAFETY: [start, end) lies inside the executable's first segment, a
    // private read-only mapping of the file at offset 0 (checked by
    // `table_pages`), which nothing writes: its pages are clean copies of
    // the file, and MADV_DONTNEED on them only drops them from this
    // process's page tables. The loader is done with the table, and were
    // it read again, the pages would be read back from the file.
    let dropped = unsafe {
        nix::sys::mman::madvise(
            addr,
            (end - start) as usize,
            nix::sys::mman::MmapAdvise::MADV_DONTNEED,
        )
    };
    if dropped.is_ok() {
        end - start
    } else {
        0
    }
}

/// The page-aligned address range inside `.rela.dyn`, when it lies in the
/// executable's first (read-only, file offset 0) mapping.
fn table_pages() -> Option<(u64, u64)> {
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let (addr, size, pie) = rela_dyn(&exe)?;
    let (base, first_end) = first_mapping(&exe)?;
    let start = if pie { base + addr } else { addr };
    let (from, to) = (start.div_ceil(PAGE) * PAGE, (start + size) / PAGE * PAGE);
    (from >= base && to <= first_end && from < to).then_some((from, to))
}

/// `.rela.dyn`'s address (relative to the load base for a PIE), its size,
/// and whether the executable is a PIE, from the ELF headers.
fn rela_dyn(exe: &Path) -> Option<(u64, u64, bool)> {
    let mut file = File::open(exe).ok()?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header).ok()?;
    // 64-bit (class 2), little-endian (data 1).
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as u64;
    let u32_at =
        |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default()) as u64;
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let pie = u16_at(&header, 16) == 3; // ET_DYN
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(&header, 40),
        u16_at(&header, 58),
        u16_at(&header, 60),
        u16_at(&header, 62),
    );
    if shentsize != 64 || shnum == 0 || shstrndx >= shnum {
        return None;
    }
    let mut sections = vec![0u8; (shnum * shentsize) as usize];
    file.seek(SeekFrom::Start(shoff)).ok()?;
    file.read_exact(&mut sections).ok()?;
    let section = |i: u64| &sections[(i * shentsize) as usize..((i + 1) * shentsize) as usize];
    let names = section(shstrndx);
    let mut strtab = vec![0u8; u64_at(names, 32).min(1 << 20) as usize];
    file.seek(SeekFrom::Start(u64_at(names, 24))).ok()?;
    file.read_exact(&mut strtab).ok()?;
    (0..shnum).map(section).find_map(|s| {
        let name = strtab.get(u32_at(s, 0) as usize..)?;
        name.starts_with(b".rela.dyn\0")
            .then(|| (u64_at(s, 16), u64_at(s, 32), pie))
    })
}

/// The start and end address of the executable's mapping at file offset 0
/// when it is private and read-only, from `/proc/self/maps`.
fn first_mapping(exe: &Path) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let exe = exe.to_str()?;
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
        let path = fields.nth(2)?;
        if path != exe || perms != "r--p" || u64::from_str_radix(offset, 16).ok()? != 0 {
            return None;
        }
        let (lo, hi) = range.split_once('-')?;
        Some((
            u64::from_str_radix(lo, 16).ok()?,
            u64::from_str_radix(hi, 16).ok()?,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary has a relocation table in its first segment; once
    /// released, none of its pages is resident, and the process still runs
    /// (and could read it again from the file).
    #[test]
    fn the_relocation_table_is_found_and_given_back() {
        let (from, to) = table_pages().expect("the test binary's .rela.dyn in its first mapping");
        assert!(to > from);
        let released = release();
        assert_eq!(released, to - from);
        let resident = resident_pages(from, to);
        assert_eq!(resident, 0, "{resident} pages of the table still resident");
        // Reading it again works: the pages come back from the file.
        // SAFETY: the range is mapped, readable, and holds plain bytes.
        let first = unsafe { std::ptr::read_volatile(from as *const u8) };
        let _ = first;
    }

    /// Pages of [from, to) present in this process, from /proc/self/pagemap.
    fn resident_pages(from: u64, to: u64) -> usize {
        let mut pagemap = File::open("/proc/self/pagemap").unwrap();
        pagemap.seek(SeekFrom::Start(from / PAGE * 8)).unwrap();
        let mut entries = vec![0u8; ((to - from) / PAGE * 8) as usize];
        pagemap.read_exact(&mut entries).unwrap();
        entries
            .chunks(8)
            .filter(|e| u64::from_le_bytes((*e).try_into().unwrap()) >> 63 == 1)
            .count()
    }
}
