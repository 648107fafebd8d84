//! The `classifyd` binary: parse flags, set up logging, run a command, map
//! errors to an exit status. All logic lives in the library.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use classifyd::config::{self, Command, ConfigError, ConfigFile, DemoArgs, RunArgs, TailArgs};
use classifyd::pipeline::PipelineConfig;
use classifyd::replica::PublishSettings;
use classifyd::transport::{jsonl, kafka};
use classifyd::{commands, shutdown::Shutdown};

/// mimalloc: far fewer page faults than glibc's heap on the per-message
/// allocations (Cargo.toml says what it measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    classifyd::allocator::purge_at_once();
    // A file size limit (ulimit -f) makes a write fail with EFBIG, which
    // the daemon reports naming the file, instead of killing it (SIGXFSZ).
    // SAFETY: setting a signal's disposition to ignore, before any thread starts.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let (cli, file) = match config::parse_args(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        // Usage errors, --help and --version, printed as clap prints them.
        Err(ConfigError::Clap(e)) => e.exit(),
        Err(e) => {
            eprintln!(
                "error: {}",
                anyhow::Error::from(e)
                    .chain()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(": ")
            );
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "info".into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
    match run(cli.command, &file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command, file: &ConfigFile) -> anyhow::Result<()> {
    match command {
        Command::Run(a) => daemon(*a, file)?,
        Command::Eval(a) => {
            let (result, _) = commands::eval(&a)?;
            let mut out = std::io::stdout().lock();
            if a.json {
                serde_json::to_writer_pretty(&mut out, &result)?;
                writeln!(out)?;
            } else {
                write!(out, "{}", result.render())?;
            }
        }
        Command::Learn(a) => {
            let s = commands::learn(&a)?;
            eprintln!(
                "learned {} of {} messages as {:?} (model version {}), into {}{}{}",
                s.learned,
                s.messages,
                a.label,
                s.model_version,
                s.checkpoint.display(),
                if s.held == 0 {
                    String::new()
                } else {
                    format!("; {} held (the reporter's trust: docs/feedback.md)", s.held)
                },
                if s.bad.is_empty() {
                    String::new()
                } else {
                    format!("; not learned: {:?}", s.bad)
                }
            );
        }
        Command::Predict(a) => {
            let (ok, bad) = commands::predict(&a)?;
            tracing::info!(predicted = ok, skipped = bad, "predict finished");
        }
        Command::DemoProduce(a) => demo(&a, file)?,
        Command::Tail(a) => tail(&a, file)?,
        Command::Inspect(a) => {
            let i = commands::inspect(&a)?;
            let mut out = std::io::stdout().lock();
            if a.json {
                serde_json::to_writer_pretty(&mut out, &i)?;
                writeln!(out)?;
            } else {
                i.render(&mut out)?;
            }
        }
    }
    Ok(())
}

/// A shutdown flag that SIGTERM and SIGINT trigger.
fn shutdown_on_signals() -> anyhow::Result<Shutdown> {
    let shutdown = Shutdown::new();
    shutdown
        .install_signal_handlers()
        .context("cannot install signal handlers")?;
    Ok(shutdown)
}

/// `classifyd run`: the pipeline's settings from the flags, then the
/// Kafka transport with --brokers, else JSON lines.
fn daemon(a: RunArgs, file: &ConfigFile) -> anyhow::Result<()> {
    a.check().map_err(anyhow::Error::msg)?;
    let (features, hyper) = a.model.settings()?;
    let pipeline = PipelineConfig {
        explain: a.explain,
        limits: a.model.limits(&features)?,
        review: a.review.settings(),
        review_output: a.review.review_topic.is_some() || a.review.review.is_some(),
        role: a.role,
        ..a.pipeline.settings()
    };
    let shutdown = shutdown_on_signals()?;
    let telemetry = match &a.metrics_addr {
        Some(addr) => Some(classifyd::metrics::install(addr)?),
        None => None,
    };
    if a.kafka.brokers.is_some() {
        let settings = kafka_settings(a, file, features, hyper, pipeline)?;
        kafka::run(&settings, &shutdown, telemetry.as_ref())?;
        return Ok(());
    }
    let settings = jsonl::JsonlSettings {
        input: a.input,
        input_name: a.input_name,
        output: a.output,
        dead_letter: a.dead_letter,
        review: a.review.review,
        checkpoint_dir: a.checkpoint_dir,
        checkpoint_interval: Duration::from_secs(a.checkpoint_interval_secs),
        checkpoint_every_updates: a.checkpoint_every_updates,
        keep_checkpoints: a.keep_checkpoints,
        features,
        hyper,
        pipeline,
        http: a.http.settings(a.mail.learn_password.as_deref()),
        mail: a
            .mail
            .settings(a.pipeline.max_message_bytes, a.http.http_max_concurrent),
    };
    jsonl::run_jsonl(&settings, &shutdown, telemetry.as_ref())?;
    Ok(())
}

/// The Kafka transport's settings from `run`'s flags (checked by
/// `RunArgs::check`).
fn kafka_settings(
    a: RunArgs,
    file: &ConfigFile,
    features: classifyd::features::FeatureConfig,
    hyper: classifyd::model::HyperChoice,
    pipeline: PipelineConfig,
) -> anyhow::Result<kafka::KafkaSettings> {
    Ok(kafka::KafkaSettings {
        brokers: a.kafka.required_brokers()?,
        properties: a.kafka.properties(file)?,
        input_topic: a.input_topic,
        feedback_topic: a.feedback_topic,
        output_topic: a.output_topic,
        dead_letter_topic: a.dead_letter_topic,
        review_topic: a.review.review_topic,
        group_id: a.group_id,
        checkpoint_dir: a.checkpoint_dir,
        model_topic: a.model_topic,
        reporter_header: a.reporter_header,
        user_header: a.user_header,
        email_input: (a.input_format == classifyd::config::InputFormat::Email).then_some(a.label_header),
        create_topics: a.create_topics,
        topic_partitions: a.topic_partitions,
        publish: PublishSettings {
            interval: Duration::from_millis(a.model_publish_ms),
            snapshot_interval: Duration::from_secs(a.model_snapshot_secs),
            ..PublishSettings::default()
        },
        checkpoint_interval: Duration::from_secs(a.checkpoint_interval_secs),
        checkpoint_every_updates: a.checkpoint_every_updates,
        keep_checkpoints: a.keep_checkpoints,
        flush_timeout: Duration::from_secs(a.shutdown_timeout_secs),
        http: a.http.settings(a.mail.learn_password.as_deref()),
        mail: a
            .mail
            .settings(a.pipeline.max_message_bytes, a.http.http_max_concurrent),
        features,
        hyper,
        pipeline,
    })
}

fn demo(a: &DemoArgs, file: &ConfigFile) -> anyhow::Result<()> {
    let shutdown = shutdown_on_signals()?;
    let s = classifyd::demo::DemoSettings {
        brokers: a.kafka.required_brokers()?,
        input: a.input.clone(),
        input_topic: a.input_topic.clone(),
        feedback_topic: a.feedback_topic.clone(),
        rate: a.rate,
        holdback_every: a.holdback_every,
        feedback_delay: a.feedback_delay,
        repeat: a.repeat,
        properties: a.kafka.properties(file)?,
    };
    let (sent, labels) = classifyd::demo::run(&s, &shutdown)?;
    tracing::info!(sent, labels, "demo producer finished");
    Ok(())
}

fn tail(a: &TailArgs, file: &ConfigFile) -> anyhow::Result<()> {
    let shutdown = shutdown_on_signals()?;
    let s = kafka::tail::TailSettings {
        brokers: a.kafka.required_brokers()?,
        topic: a.topic.clone(),
        max: a.max,
        no_follow: a.no_follow,
        properties: a.kafka.properties(file)?,
    };
    let n = kafka::tail::tail(&s, &shutdown, &mut std::io::stdout().lock())?;
    tracing::debug!(records = n, "tail finished");
    Ok(())
}
