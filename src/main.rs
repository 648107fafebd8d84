//! The `classifyd` binary: parse flags, set up logging, run a command, map
//! errors to an exit status. All logic lives in the library.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use classifyd::config::properties::properties;
use classifyd::config::{self, Cli, Command};
use classifyd::pipeline::Role;
use classifyd::replica::PublishSettings;
use classifyd::transport::{jsonl, kafka};
use classifyd::{commands, shutdown::Shutdown};

/// mimalloc: far fewer page faults than glibc's heap on the per-message
/// allocations (Cargo.toml says what it measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // A file size limit (ulimit -f) makes a write fail with EFBIG, which
    // the daemon reports naming the file, instead of killing it (SIGXFSZ).
    // SAFETY: setting a signal's disposition to ignore, before any thread starts.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let args: Vec<String> = std::env::args().collect();
    if let Some(path) = config::config_path_from_args(&args)
        && let Err(e) = config::apply_config_file(&path)
    {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "info".into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(a) => {
            let a = *a;
            let (features, hyper) = a.model.settings().map_err(anyhow::Error::msg)?;
            let mut pipeline = a.pipeline.settings().map_err(anyhow::Error::msg)?;
            pipeline.limits = a.model.limits(&features).map_err(anyhow::Error::msg)?;
            pipeline.review = a.review.settings().map_err(anyhow::Error::msg)?;
            pipeline.review_output = a.review.review_topic.is_some() || a.review.review.is_some();
            let shutdown = Shutdown::new();
            shutdown
                .install_signal_handlers()
                .context("cannot install signal handlers")?;
            let telemetry = match &a.metrics_addr {
                Some(addr) => Some(classifyd::metrics::install(addr)?),
                None => None,
            };
            pipeline.role = a.role;
            if let Some(brokers) = a.brokers {
                if a.review.review.is_some() {
                    anyhow::bail!("--review FILE is for JSON lines; with --brokers, --review-topic names the topic");
                }
                if a.checkpoint_dir.is_none() && a.role != Role::Predictor {
                    anyhow::bail!("--checkpoint-dir is required with --brokers (it holds the model and the offsets)");
                }
                let settings = kafka::KafkaSettings {
                    brokers,
                    input_topic: a.input_topic,
                    feedback_topic: a.feedback_topic,
                    output_topic: a.output_topic,
                    dead_letter_topic: a.dead_letter_topic,
                    review_topic: a.review.review_topic,
                    group_id: a.group_id,
                    properties: properties(&a.kafka_property, std::env::vars_os()).map_err(anyhow::Error::msg)?,
                    checkpoint_dir: a.checkpoint_dir,
                    model_topic: a.model_topic,
                    create_topics: a.create_topics,
                    topic_partitions: a.topic_partitions,
                    publish: PublishSettings {
                        interval: Duration::from_millis(a.model_publish_ms),
                        snapshot_interval: Duration::from_secs(a.model_snapshot_secs),
                        ..PublishSettings::default()
                    },
                    checkpoint_interval: Duration::from_secs(a.checkpoint_interval_secs.max(1)),
                    checkpoint_every_updates: a.checkpoint_every_updates,
                    keep_checkpoints: a.keep_checkpoints,
                    flush_timeout: Duration::from_secs(a.shutdown_timeout_secs.max(1)),
                    features,
                    hyper,
                    pipeline,
                };
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .context("cannot start the tokio runtime")?;
                rt.block_on(kafka::run(&settings, &shutdown, telemetry.as_ref()))?;
                return Ok(());
            }
            if a.review.review_topic.is_some() {
                anyhow::bail!(
                    "--review-topic needs --brokers; without them, --review FILE writes the messages to review"
                );
            }
            if a.role != Role::Standalone {
                anyhow::bail!(
                    "--role {} needs --brokers: the model travels from the learner to predictors on a Kafka topic",
                    a.role
                );
            }
            let settings = jsonl::JsonlSettings {
                input: a.input,
                input_name: a.input_name,
                output: a.output,
                dead_letter: a.dead_letter,
                review: a.review.review,
                checkpoint_dir: a.checkpoint_dir,
                checkpoint_interval: Duration::from_secs(a.checkpoint_interval_secs.max(1)),
                checkpoint_every_updates: a.checkpoint_every_updates,
                keep_checkpoints: a.keep_checkpoints,
                features,
                hyper,
                pipeline,
            };
            jsonl::run_jsonl(&settings, &shutdown, telemetry.as_ref())?;
        }
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
        Command::Predict(a) => {
            let (ok, bad) = commands::predict(&a)?;
            tracing::info!(predicted = ok, skipped = bad, "predict finished");
        }
        Command::DemoProduce(a) => {
            let shutdown = Shutdown::new();
            shutdown
                .install_signal_handlers()
                .context("cannot install signal handlers")?;
            let s = classifyd::demo::DemoSettings {
                brokers: a.brokers,
                input: a.input,
                input_topic: a.input_topic,
                feedback_topic: a.feedback_topic,
                rate: a.rate,
                holdback_every: a.holdback_every,
                feedback_delay: a.feedback_delay,
                repeat: a.repeat,
                properties: properties(&a.kafka_property, std::env::vars_os()).map_err(anyhow::Error::msg)?,
            };
            let (sent, labels) = classifyd::demo::run(&s, &shutdown).map_err(anyhow::Error::msg)?;
            tracing::info!(sent, labels, "demo producer finished");
        }
        Command::Tail(a) => {
            let shutdown = Shutdown::new();
            shutdown
                .install_signal_handlers()
                .context("cannot install signal handlers")?;
            let s = kafka::tail::TailSettings {
                brokers: a.brokers,
                topic: a.topic,
                max: a.max,
                no_follow: a.no_follow,
                properties: properties(&a.kafka_property, std::env::vars_os()).map_err(anyhow::Error::msg)?,
            };
            let n = kafka::tail::tail(&s, &shutdown, &mut std::io::stdout().lock()).map_err(anyhow::Error::msg)?;
            tracing::debug!(records = n, "tail finished");
        }
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
