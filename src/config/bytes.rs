//! Byte sizes on the command line: `268435456`, `256MiB`, `1.5GiB`, `512k`.
//! Units are binary (KiB = 1024 bytes); `K`, `M`, `G` and `T` mean the same.

/// Parses a byte size (see the module's doc).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (expected B, KiB, MiB, GiB or TiB)"
            ));
        }
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 256MiB)"))?;
    let bytes = n * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > usize::MAX as f64 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("256m"), Ok(256 << 20));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes(" 2 KiB "), Ok(2048));
        assert!(parse_bytes("12 parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("MiB").is_err());
        assert!(parse_bytes("-1").is_err());
    }
}
