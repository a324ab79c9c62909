//! What planning needs to know of the machine: the last-level cache size, read once from
//! Linux's sysfs, and the streaming-store threshold it gives.

use std::sync::OnceLock;

/// Outputs of at least this many bytes (a common server last-level cache) always stream;
/// on a host with a smaller last-level cache, smaller ones do too (see
/// [`streaming_output_bytes`]).
pub const STREAMING_OUTPUT_BYTES: u64 = 32 << 20;

/// The output size from which large slices are written with streaming stores on this host:
/// a quarter of its last-level cache, at most [`STREAMING_OUTPUT_BYTES`], which also applies
/// when the cache size is unknown (a size read is 1 MiB or more, so this is at least 256 KiB). A slice gather reads as many bytes of data as it writes, so from there on
/// one call's working set is half the cache or more, and on a cache shared with other cores
/// the output is evicted before it is read again: the stores then only cost the reads of the
/// lines they fill. Below a quarter of the cache the output is still cached when read, and
/// streaming is slower (`gather-jit bench --op gather --data-shape 30522x768 --indices-shape
/// 8x128` with and without streaming on hosts of different caches).
pub fn streaming_output_bytes() -> u64 {
    static BYTES: OnceLock<u64> = OnceLock::new();
    *BYTES.get_or_init(|| {
        last_level_cache_bytes().map_or(STREAMING_OUTPUT_BYTES, |cache| {
            (cache / 4).min(STREAMING_OUTPUT_BYTES)
        })
    })
}

/// The size of the last-level cache CPU 0 sees (the highest level of data or unified cache),
/// from Linux's sysfs; `None` elsewhere, if it cannot be read, or if it reads under 1 MiB
/// (no last-level cache is that small: something else was read).
fn last_level_cache_bytes() -> Option<u64> {
    let caches = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let read = |dir: &std::path::Path, name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let (_, bytes) = caches
        .filter_map(|entry| {
            let dir = entry.ok()?.path();
            let kind = read(&dir, "type")?;
            if !matches!(kind.trim(), "Data" | "Unified") {
                return None;
            }
            let level: u32 = read(&dir, "level")?.trim().parse().ok()?;
            Some((level, parse_cache_size(read(&dir, "size")?.trim())?))
        })
        .max()?;
    (bytes >= 1 << 20).then_some(bytes)
}

/// `"8192K"`, `"32M"` or `"512"` (bytes) as bytes.
fn parse_cache_size(text: &str) -> Option<u64> {
    let (digits, unit) = [("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)]
        .into_iter()
        .find_map(|(suffix, unit)| Some((text.strip_suffix(suffix)?, unit)))
        .unwrap_or((text, 1));
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// What planning needs to know of the machine it plans for: probed once
/// ([`Host::current`]), or fixed ([`Host::REFERENCE`]) so that a plan is the same on every
/// machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// Outputs of at least this many bytes write their large slices with streaming stores
    /// (see [`streaming_output_bytes`]).
    pub streaming_output_bytes: u64,
}

impl Host {
    /// A machine with a last-level cache of at least 128 MiB: outputs of
    /// [`STREAMING_OUTPUT_BYTES`] and more stream.
    #[cfg_attr(
        not(feature = "unstable"),
        expect(dead_code, reason = "only the `unstable` API uses it")
    )]
    pub const REFERENCE: Host = Host {
        streaming_output_bytes: STREAMING_OUTPUT_BYTES,
    };

    /// This machine, as probed (once) from its cache sizes.
    pub fn current() -> Host {
        Host {
            streaming_output_bytes: streaming_output_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("8192K"), Some(8 << 20));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("512"), Some(512));
        for bad in ["", "K", "12Q", "-1K", "99999999999999999999G"] {
            assert_eq!(parse_cache_size(bad), None, "{bad}");
        }
    }
}
