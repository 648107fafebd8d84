//! The daemon's topics, created when missing (`--create-topics`, on by
//! default): the input, feedback, output and dead-letter topics with
//! `--topic-partitions` partitions, the model topic with one, compacted. A
//! broker that refuses (no rights, say) is logged once per topic with the
//! command that creates it; the run goes on (the topic may exist anyway).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use super::KafkaSettings;
use super::context::client_config;
use crate::pipeline::Role;

/// A topic to have: name, partitions, compacted.
type Wanted<'a> = (&'a str, i32, bool);

/// The topics a process of this role reads or writes.
fn wanted(s: &KafkaSettings) -> Vec<Wanted<'_>> {
    let n = s.topic_partitions;
    let role = s.role;
    let mut out = vec![(s.input_topic.as_str(), n, false)];
    if role != Role::Predictor {
        out.push((s.feedback_topic.as_str(), n, false));
    }
    if role != Role::Learner {
        out.push((s.output_topic.as_str(), n, false));
        if let Some(t) = &s.review_topic {
            out.push((t.as_str(), n, false));
        }
    }
    out.push((s.dead_letter_topic.as_str(), n, false));
    if role != Role::Standalone {
        out.push((s.model_topic.as_str(), 1, true));
    }
    if let Some(pool) = &s.pool_topic {
        out.push((pool.as_str(), 1, true));
    }
    // Topics named twice (the feedback on the input topic, say) are asked for once.
    let mut seen = std::collections::HashSet::new();
    out.retain(|t| seen.insert(t.0));
    out
}

/// Creates the topics this process needs that are missing (only the model
/// topic when `--create-topics false`: replicas cannot work without it).
/// Blocks until the broker has answered (or not): rdkafka's admin calls
/// are futures that its own thread completes, so a current-thread runtime
/// only waits for them.
pub(super) fn ensure(s: &KafkaSettings) {
    match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(rt) => rt.block_on(create_missing(s)),
        Err(error) => tracing::warn!(%error, "cannot start the admin runtime; not creating topics"),
    }
}

async fn create_missing(s: &KafkaSettings) {
    let admin: AdminClient<DefaultClientContext> = match client_config(s).create() {
        Ok(a) => a,
        Err(error) => {
            tracing::warn!(%error, "cannot create an admin client; not creating topics");
            return;
        }
    };
    let wanted: Vec<Wanted<'_>> = wanted(s).into_iter().filter(|t| s.create_topics || t.2).collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    // The broker's default replication (-1), else one replica (brokers
    // that predate KIP-464, single-broker setups).
    let mut left = wanted;
    for replication in [-1, 1] {
        let new: Vec<NewTopic<'_>> = left
            .iter()
            .map(|&(name, partitions, compact)| {
                let t = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
                if compact { t.set("cleanup.policy", "compact") } else { t }
            })
            .collect();
        let results = match admin.create_topics(&new, &opts).await {
            Ok(r) => r,
            Err(error) => {
                tracing::warn!(%error, "cannot create topics; assuming they exist");
                return;
            }
        };
        let mut retry = Vec::new();
        for (result, wanted) in results.into_iter().zip(left) {
            match result {
                Ok(name) => tracing::info!(topic = %name, partitions = wanted.1, compacted = wanted.2, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, RDKafkaErrorCode::InvalidReplicationFactor)) if replication < 0 => retry.push(wanted),
                Err((name, code)) => tracing::warn!(
                    topic = %name,
                    error = %code,
                    "cannot create topic; if it is missing, create it: kafka-topics.sh --bootstrap-server {} --create --topic {name} --partitions {}{}",
                    s.brokers,
                    wanted.1,
                    if wanted.2 { " --config cleanup.policy=compact" } else { "" }
                ),
            }
        }
        if retry.is_empty() {
            return;
        }
        left = retry;
    }
}
