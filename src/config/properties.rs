//! librdkafka properties: `-X key=value` flags, `CLASSIFYD_KAFKA_*`
//! variables and the config file's `[kafka]` table, merged in that order of
//! precedence. Owns only the names and the merge; the Kafka transport
//! applies them.

/// Parses `key=value` librdkafka properties.
pub fn parse_properties(raw: &[String]) -> Result<Vec<(String, String)>, String> {
    raw.iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(format!("-X takes key=value, got {p:?}")),
        })
        .collect()
}

/// The prefix of the environment variables that set librdkafka properties,
/// one a variable: `CLASSIFYD_KAFKA_SASL_PASSWORD=...` is `-X
/// sasl.password=...`, kept off the command line (where `ps` shows it to
/// every user of the machine) and settable from a Kubernetes secret or a
/// systemd `EnvironmentFile`.
pub const PROPERTY_ENV_PREFIX: &str = "CLASSIFYD_KAFKA_";

/// The librdkafka property an environment variable names, after
/// [`PROPERTY_ENV_PREFIX`]: lowercased, `_` for `.`, `__` for `_` and
/// `___` for `-` (the convention of Confluent's container images), so
/// `SASL_PASSWORD` is `sasl.password` and `LOG__LEVEL` is `log_level`.
pub fn property_of_env(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '_' {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        let mut run = 1;
        while run < 3 && chars.next_if_eq(&'_').is_some() {
            run += 1;
        }
        out.push(match run {
            1 => '.',
            2 => '_',
            _ => '-',
        });
    }
    out
}

/// The environment variable that sets librdkafka property `key`: the
/// inverse of [`property_of_env`].
pub fn env_of_property(key: &str) -> String {
    let mut out = String::from(PROPERTY_ENV_PREFIX);
    for c in key.chars() {
        match c {
            '.' => out.push('_'),
            '_' => out.push_str("__"),
            '-' => out.push_str("___"),
            c => out.push(c.to_ascii_uppercase()),
        }
    }
    out
}

/// The librdkafka properties in force: those of the environment's
/// `CLASSIFYD_KAFKA_*` variables (which the config file's `[kafka]` table
/// also sets), then the `-X` flags, which win over them. Sorted by key,
/// each key once.
pub fn properties(
    flags: &[String],
    env: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<Vec<(String, String)>, String> {
    let mut all = std::collections::BTreeMap::new();
    for (name, value) in env {
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PROPERTY_ENV_PREFIX)) else {
            continue;
        };
        if rest.is_empty() {
            continue;
        }
        let value = value
            .into_string()
            .map_err(|_| format!("{PROPERTY_ENV_PREFIX}{rest} is not valid UTF-8"))?;
        all.insert(property_of_env(rest), value);
    }
    all.extend(parse_properties(flags)?);
    Ok(all.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse() {
        let p = parse_properties(&["security.protocol=SASL_SSL".into(), "sasl.password=a=b".into()]).unwrap();
        assert_eq!(p[1], ("sasl.password".to_string(), "a=b".to_string()));
        assert!(parse_properties(&["nokey".into()]).is_err());
        assert!(parse_properties(&["=v".into()]).is_err());
    }

    #[test]
    fn property_names_round_trip_through_the_environment() {
        for (key, var) in [
            ("sasl.password", "CLASSIFYD_KAFKA_SASL_PASSWORD"),
            ("security.protocol", "CLASSIFYD_KAFKA_SECURITY_PROTOCOL"),
            ("log_level", "CLASSIFYD_KAFKA_LOG__LEVEL"),
            (
                "ssl.endpoint.identification.algorithm",
                "CLASSIFYD_KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM",
            ),
            ("a-b_c.d", "CLASSIFYD_KAFKA_A___B__C_D"),
        ] {
            assert_eq!(env_of_property(key), var);
            assert_eq!(property_of_env(&var[PROPERTY_ENV_PREFIX.len()..]), key);
        }
    }

    /// Variables and flags together: each key once, a flag over a variable,
    /// other variables ignored.
    #[test]
    fn flags_win_over_the_environment() {
        let env = [
            ("CLASSIFYD_KAFKA_SASL_PASSWORD", "from-env=1"),
            ("CLASSIFYD_KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),
            ("CLASSIFYD_BROKERS", "b:9092"),
            ("CLASSIFYD_KAFKA_", "ignored"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let p = properties(&["security.protocol=SSL".into()], env).unwrap();
        assert_eq!(
            p,
            vec![
                ("sasl.password".to_string(), "from-env=1".to_string()),
                ("security.protocol".to_string(), "SSL".to_string()),
            ]
        );
        assert!(properties(&["novalue".into()], []).is_err());
    }
}
