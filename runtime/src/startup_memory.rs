//! Giving back the memory that start-up used and the steady loop does not.
//!
//! A page of the executable (code, constants, the loader's relocation
//! table) is mapped into a process when it is first touched, together with
//! its neighbours (the kernel's fault-around maps up to 64 KiB of the file
//! at once), and it stays mapped. So everything start-up ran (argument
//! parsing, configuration, connecting, forking) keeps counting in the
//! process's memory, though its loop never runs it again; and so does the
//! heap start-up freed. [`give_back`] drops the executable's clean
//! read-only mappings from this process's page tables with `MADV_DONTNEED`
//! (the code the process runs afterwards is mapped again from the page
//! cache on its first touch), and returns the heap's free pages to the
//! system. The supervisor calls it once its workers are forked (a fork
//! copies no page-table entries of file mappings: each worker maps the
//! code it runs itself), and each worker once it is connected, before its
//! loop. In `jobworker bench` this took the supervisor and two workers
//! from 9.9 to 8.5 MiB PSS at the peak of a drain.

use std::ffi::c_void;
use std::ptr::NonNull;

/// Returns start-up's pages: the heap's free ones, and this process's
/// mappings of the executable's code and constants (not of the relocated
/// RELRO segment, nor any other mapping holding private copies). Returns
/// the bytes of the executable's ranges given back. Best effort: a
/// mapping that cannot be read or dropped is left as it is.
pub(crate) fn give_back() -> u64 {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of glibc's heap to the
    // system; it takes the allocator's lock like any allocation.
    unsafe {
        nix::libc::malloc_trim(0);
    }
    let mut released = 0;
    for (start, end) in executable_ranges() {
        let Some(addr) = NonNull::new(start as *mut c_void) else {
            continue;
        };
        // SAFETY: [start, end) is a private, read-only mapping of the
        // executable's file with no anonymous pages (checked by
        // `clean_read_only`): every page in it is a clean copy of the
        // file. MADV_DONTNEED only drops them from this process's page
        // tables; the next touch maps the file's page again, with the same
        // bytes. (A range with anonymous pages, such as the RELRO segment
        // the loader relocated, would lose its changes: it is skipped.)
        let dropped = unsafe {
            nix::sys::mman::madvise(
                addr,
                (end - start) as usize,
                nix::sys::mman::MmapAdvise::MADV_DONTNEED,
            )
        };
        if dropped.is_ok() {
            released += end - start;
        }
    }
    released
}

/// This process's clean read-only mappings of its executable.
fn executable_ranges() -> Vec<(u64, u64)> {
    let exe = std::fs::read_link("/proc/self/exe");
    let smaps = std::fs::read_to_string("/proc/self/smaps");
    match (exe, smaps) {
        (Ok(exe), Ok(smaps)) => exe
            .to_str()
            .map(|exe| clean_read_only(&smaps, exe))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The ranges of `exe`'s mappings in `smaps` (the text of
/// `/proc/self/smaps`) that are private, not writable, and hold no
/// anonymous pages.
fn clean_read_only(smaps: &str, exe: &str) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut current: Option<(u64, u64)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if let Some((lo, hi)) = first.split_once('-') {
            // A mapping's header: range, perms, offset, device, inode, path.
            let perms = fields.next().unwrap_or_default();
            let path = fields.nth(3);
            let ours =
                path == Some(exe) && perms.starts_with('r') && !perms.contains('w') && perms.ends_with('p');
            current = match (ours, u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) {
                (true, Ok(lo), Ok(hi)) if lo < hi => Some((lo, hi)),
                _ => None,
            };
        } else if first == "Anonymous:" {
            if let Some(range) = current.take() {
                if fields.next() == Some("0") {
                    out.push(range);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::{Read, Seek, SeekFrom};

    use super::*;

    const PAGE: u64 = 4096;

    const SMAPS: &str = "\
55d0-55e0 r--p 00000000 fd:01 42 /bin/jobworker
Rss:                 696 kB
Anonymous:             0 kB
55e0-56f0 r-xp 00300000 fd:01 42 /bin/jobworker
Anonymous:             0 kB
56f0-5700 r--p 00bc5000 fd:01 42 /bin/jobworker
Anonymous:          1156 kB
5700-5710 rw-p 00ceb000 fd:01 42 /bin/jobworker
Anonymous:            16 kB
5710-5720 r-xp 00000000 fd:01 43 /lib/libc.so.6
Anonymous:             0 kB
5720-5730 r--s 00000000 fd:01 42 /bin/jobworker
Anonymous:             0 kB
";

    /// The code and the constants are chosen; the relocated RELRO
    /// segment, the writable data, other files and shared mappings are not.
    #[test]
    fn only_clean_private_read_only_mappings_of_the_executable() {
        assert_eq!(
            clean_read_only(SMAPS, "/bin/jobworker"),
            [(0x55d0, 0x55e0), (0x55e0, 0x56f0)]
        );
    }

    /// In this very process: the executable's pages go (fewer stay
    /// resident than before, though this test's own code comes back at
    /// once), and the code runs on, read back from the file.
    #[test]
    fn the_executables_pages_go_and_the_code_runs_on() {
        let ranges = executable_ranges();
        assert!(!ranges.is_empty(), "no clean mapping of the test binary found");
        let resident = || {
            ranges
                .iter()
                .map(|&(from, to)| resident_pages(from, to))
                .sum::<usize>()
        };
        let before = resident();
        assert!(before > 0);
        assert!(give_back() > 0, "nothing of the test binary was given back");
        let after = resident();
        assert!(after < before, "{after} pages resident after, {before} before");
        let again: u64 = (1..=10u64).map(|n| n * n).sum();
        assert_eq!(again, 385);
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
