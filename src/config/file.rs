//! The optional TOML config file (`--config FILE`, `CLASSIFYD_CONFIG`),
//! beneath flags and environment variables: its keys are flag names
//! (`learning-rate = 0.5` or `learning_rate = 0.5`), and a `[kafka]` table
//! holds librdkafka properties. Read without touching the process's
//! environment: its values become the defaults of the flags they name
//! (so a flag, then its variable, win over them), and its `[kafka]`
//! properties sit beneath the `CLASSIFYD_KAFKA_*` variables.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Command, CommandFactory, FromArgMatches};

use super::properties::env_of_property;
use super::{Cli, ConfigError};

/// What a config file holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ConfigFile {
    /// (environment variable of a flag, value), in the file's order.
    pub flags: Vec<(String, String)>,
    /// librdkafka properties as their `CLASSIFYD_KAFKA_*` variables would hold them.
    pub kafka: Vec<(String, String)>,
}

impl ConfigFile {
    /// Reads and checks the file at `path`: unknown keys, other tables and
    /// values that are not scalars are errors.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let at = || path.to_path_buf();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile { path: at(), source })?;
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError::File {
            path: at(),
            detail: e.to_string(),
        })?;
        Self::from_table(table).map_err(|detail| ConfigError::File { path: at(), detail })
    }

    fn from_table(table: toml::Table) -> Result<Self, String> {
        let known = known_env_vars();
        let mut file = ConfigFile::default();
        for (key, value) in table {
            if key == "kafka" {
                let toml::Value::Table(properties) = value else {
                    return Err("\"kafka\" must be a table of librdkafka properties".into());
                };
                for (property, value) in properties {
                    let value = scalar(&format!("kafka.{property}"), value)?;
                    file.kafka.push((env_of_property(&property), value));
                }
                continue;
            }
            let var = format!("CLASSIFYD_{}", key.replace('-', "_").to_ascii_uppercase());
            if !known.contains(&var) {
                return Err(format!("unknown key {key:?}"));
            }
            file.flags.push((var, scalar(&key, value)?));
        }
        Ok(file)
    }

    /// The environment a command reads librdkafka properties from: the
    /// file's `[kafka]` table, then the process's variables (which win).
    pub fn kafka_env(&self) -> impl Iterator<Item = (OsString, OsString)> + '_ {
        let file = self.kafka.iter().map(|(k, v)| (OsString::from(k), OsString::from(v)));
        file.chain(std::env::vars_os())
    }

    /// The flags of `command` that `matches` got from the command line, a
    /// variable or this file (not from a default).
    fn given(&self, command: &Command, matches: &clap::ArgMatches) -> super::Given {
        use super::run::Source;
        use clap::parser::ValueSource;
        super::Given::of(command.get_arguments().filter_map(|a| {
            let id = a.get_id().as_str();
            let env = a.get_env().and_then(|e| e.to_str());
            let source = match matches.value_source(id) {
                Some(ValueSource::CommandLine) => Source::CommandLine,
                Some(ValueSource::EnvVariable) => Source::Variable(env.unwrap_or_default().to_string()),
                _ if env.is_some_and(|env| self.flags.iter().any(|(var, _)| var == env)) => Source::ConfigFile,
                _ => return None,
            };
            Some((id.to_string(), source))
        }))
    }

    /// `command` with the file's values as the defaults of the flags they
    /// name, in every subcommand.
    fn apply(&self, mut command: Command) -> Command {
        let ids: Vec<(clap::Id, String)> = command
            .get_arguments()
            .filter_map(|a| {
                let env = a.get_env()?.to_str()?;
                let (_, value) = self.flags.iter().rev().find(|(var, _)| var == env)?;
                Some((a.get_id().clone(), value.clone()))
            })
            .collect();
        for (id, value) in ids {
            command = command.mut_arg(id, |a| a.default_value(value));
        }
        let subs: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_string()).collect();
        for name in subs {
            command = command.mut_subcommand(name, |s| self.apply(s));
        }
        command
    }
}

/// Parses the command line, with a config file's values beneath flags
/// and environment variables. The file is `--config FILE`, else
/// `CLASSIFYD_CONFIG`, else none.
pub fn parse_args(args: Vec<OsString>) -> Result<(Cli, ConfigFile), ConfigError> {
    let file = match config_path_from_args(&args) {
        Some(path) => ConfigFile::read(&path)?,
        None => ConfigFile::default(),
    };
    let command = file.apply(Cli::command());
    let matches = command.clone().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let (super::Command::Run(a), Some(run), Some(sub)) = (
        &mut cli.command,
        command.find_subcommand("run"),
        matches.subcommand_matches("run"),
    ) {
        a.given = file.given(run, sub);
    }
    Ok((cli, file))
}

fn scalar(key: &str, value: toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!("key {key:?} must be a scalar, got {}", other.type_str())),
    }
}

/// Every environment variable a flag reads.
pub(super) fn known_env_vars() -> Vec<String> {
    fn walk(cmd: &Command, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            if let Some(env) = a.get_env() {
                out.push(env.to_string_lossy().into_owned());
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &mut out);
    out
}

/// Finds `--config FILE` (or CLASSIFYD_CONFIG) before clap parses, so the
/// file's values can become the defaults clap falls back on.
fn config_path_from_args(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("CLASSIFYD_CONFIG").map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Command as Sub;

    fn file(text: &str) -> Result<ConfigFile, String> {
        ConfigFile::from_table(text.parse().map_err(|e: toml::de::Error| e.to_string())?)
    }

    fn eval_with(f: &ConfigFile, args: &[&str]) -> Box<crate::config::EvalArgs> {
        let all: Vec<OsString> = ["classifyd", "eval", "--input", "x"]
            .iter()
            .chain(args)
            .map(OsString::from)
            .collect();
        let m = f.apply(Cli::command()).try_get_matches_from(all).unwrap();
        match Cli::from_arg_matches(&m).unwrap().command {
            Sub::Eval(e) => e,
            _ => panic!("not eval"),
        }
    }

    #[test]
    fn file_values_sit_beneath_flags() {
        let f = file("learning-rate = 0.25\nbits = 18\nsplit_views = false\n[kafka]\n\"sasl.password\" = \"pw\"\n")
            .unwrap();
        let e = eval_with(&f, &[]);
        assert_eq!(
            (e.model.learning_rate, e.model.bits, e.model.split_views),
            (Some(0.25), Some(18), false)
        );
        let e = eval_with(&f, &["--bits", "20"]);
        assert_eq!(e.model.bits, Some(20));
        assert_eq!(
            f.kafka,
            [("CLASSIFYD_KAFKA_SASL_PASSWORD".to_string(), "pw".to_string())]
        );
        // The process's environment was not touched.
        assert!(std::env::var_os("CLASSIFYD_LEARNING_RATE").is_none());
    }

    #[test]
    fn bad_files_are_refused() {
        assert!(file("no-such-flag = 1").unwrap_err().contains("unknown key"));
        assert!(file("bits = [1]").unwrap_err().contains("scalar"));
        assert!(file("kafka = 3").unwrap_err().contains("table"));
        // A value clap refuses is refused as if given on the command line.
        let f = file("bits = \"many\"").unwrap();
        let all: Vec<OsString> = ["classifyd", "eval", "--input", "x"]
            .iter()
            .map(OsString::from)
            .collect();
        assert!(f.apply(Cli::command()).try_get_matches_from(all).is_err());
    }
}
