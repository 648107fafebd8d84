//! The catalog of every metric classifyd exports: name, kind and help,
//! in one list that `describe`, the README's table and the tests read.

/// Every exported metric: name, kind, unit, help. The README's table and the
/// test that scrapes `/metrics` both come from this list.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "classifyd_messages_total",
        "counter",
        "Messages handled, by kind (labeled, unlabeled, feedback, any) and outcome",
    ),
    (
        "classifyd_predictions_total",
        "counter",
        "Predictions published, by predicted class",
    ),
    (
        "classifyd_bad_input_total",
        "counter",
        "Bad input sent to the dead-letter output, by reason",
    ),
    (
        "classifyd_feedback_cache_entries",
        "gauge",
        "Messages waiting in the cache for a late label",
    ),
    (
        "classifyd_feedback_cache_bytes",
        "gauge",
        "Bytes of text the late-label cache holds, LZ4-compressed where that saves (what --feedback-cache-bytes bounds)",
    ),
    (
        "classifyd_feedback_cache_dropped_total",
        "counter",
        "Messages dropped from the late-label cache, by cause (expired, evicted)",
    ),
    (
        "classifyd_progressive_examples_total",
        "counter",
        "Labeled examples counted by progressive (test-then-train) evaluation",
    ),
    (
        "classifyd_progressive_accuracy_ratio",
        "gauge",
        "Progressive accuracy (subset accuracy for multi-label), by window (cumulative, sliding)",
    ),
    (
        "classifyd_progressive_macro_f1_ratio",
        "gauge",
        "Progressive macro-averaged F1, by window",
    ),
    (
        "classifyd_class_precision_ratio",
        "gauge",
        "Per-class precision over the sliding window",
    ),
    (
        "classifyd_class_recall_ratio",
        "gauge",
        "Per-class recall over the sliding window",
    ),
    (
        "classifyd_class_f1_ratio",
        "gauge",
        "Per-class F1 over the sliding window",
    ),
    ("classifyd_roc_auc_ratio", "gauge", "ROC AUC of binary tasks, by window"),
    (
        "classifyd_published_accuracy_ratio",
        "gauge",
        "Accuracy of published predictions as judged by late labels, by window",
    ),
    (
        "classifyd_user_labeled_total",
        "counter",
        "Labeled messages that named a user, by band of the user's labels before them (0-50, 50-500, 500+)",
    ),
    (
        "classifyd_user_correct_total",
        "counter",
        "Of those, the ones predicted right (inline labels progressively, late labels as published), by band",
    ),
    (
        "classifyd_user_accuracy_ratio",
        "gauge",
        "Cumulative accuracy of users' labeled messages, by band of the user's labels (who gains from personal features)",
    ),
    (
        "classifyd_stack_weight",
        "gauge",
        "Weight of each member of a binary model's stack in its margin (member=bias: the bias)",
    ),
    ("classifyd_classes", "gauge", "Classes the model knows"),
    (
        "classifyd_model_version",
        "gauge",
        "Examples learned by the model (published with each prediction)",
    ),
    (
        "classifyd_drift_detections_total",
        "counter",
        "Rises of the error rate found by the Page-Hinkley test, by stream (progressive, published)",
    ),
    (
        "classifyd_drift_statistic",
        "gauge",
        "The Page-Hinkley statistic of the error rate in standard deviations, by stream (a drift past 100)",
    ),
    (
        "classifyd_drift_last_detection_timestamp_seconds",
        "gauge",
        "When the last drift was found, by stream (NaN: none yet)",
    ),
    (
        "classifyd_uncertain_predictions_total",
        "counter",
        "Predictions in the uncertain band (marked \"uncertain\": true)",
    ),
    (
        "classifyd_review_messages_total",
        "counter",
        "Uncertain messages by outcome: sent (for review) or over_budget (--review-budget, --review-per-minute)",
    ),
    (
        "classifyd_labels_total",
        "counter",
        "Labels by how far they were believed: in_full, down_weighted, held (reporter not trusted), corroborated (held, then confirmed by another reporter), refused (bad reporter); and as facts: repeated (the same label again, not learned), replaced (the first taken back), forgotten, unrecorded (replaced or forgotten without its step: learned on top)",
    ),
    (
        "classifyd_forgets_total",
        "counter",
        "Forgets that took nothing back: unmatched (id not in the record) or refused (a trusted reporter's label)",
    ),
    (
        "classifyd_label_contradiction_ratio",
        "gauge",
        "Recent share of labels that contradicted a confident prediction (a rise: noisy feedback, an attack, or a change of the stream)",
    ),
    ("classifyd_reporters", "gauge", "Reporters whose record is kept"),
    (
        "classifyd_reporters_unreliable",
        "gauge",
        "Reporters kept whose trust is under one half",
    ),
    (
        "classifyd_reporters_evicted_total",
        "counter",
        "Reporters dropped to keep to --max-reporters",
    ),
    (
        "classifyd_review_band",
        "gauge",
        "The uncertain band: confidences (score gap to the runner-up) below it are uncertain",
    ),
    (
        "classifyd_model_weights_bytes",
        "gauge",
        "Bytes the model's weights or counts hold (bounded by --model-memory)",
    ),
    (
        "classifyd_model_weights_pruned_total",
        "counter",
        "Smallest weights dropped to keep the model within --model-memory",
    ),
    (
        "classifyd_learn_duration_seconds",
        "histogram",
        "Time to handle a labeled message (parse, features, predict, learn)",
    ),
    (
        "classifyd_predict_duration_seconds",
        "histogram",
        "Time to handle an unlabeled message (parse, features, predict)",
    ),
    (
        "classifyd_end_to_end_latency_seconds",
        "histogram",
        "From the input message's timestamp to its prediction's publication (Kafka)",
    ),
    (
        "classifyd_consumer_lag_messages",
        "gauge",
        "Messages behind the partition's end, by topic and partition (Kafka)",
    ),
    (
        "classifyd_rebalances_total",
        "counter",
        "Consumer-group rebalances, by kind (assign, revoke) (Kafka)",
    ),
    (
        "classifyd_producer_queue_messages",
        "gauge",
        "Messages waiting in the producer's queue (Kafka)",
    ),
    (
        "classifyd_delivery_failures_total",
        "counter",
        "Outputs the producer could not deliver (Kafka)",
    ),
    (
        "classifyd_consumer_errors_total",
        "counter",
        "Errors the consumer met and retried, e.g. while the broker is away (Kafka)",
    ),
    (
        "classifyd_model_age_seconds",
        "gauge",
        "Seconds since the learner published the model version served (predictor; 0 elsewhere)",
    ),
    (
        "classifyd_model_versions_behind",
        "gauge",
        "Versions the learner has published past the one served (predictor; 0 elsewhere)",
    ),
    (
        "classifyd_model_epoch",
        "gauge",
        "Epoch (learner run) of the model served or published",
    ),
    (
        "classifyd_model_staleness_seconds",
        "histogram",
        "From the learner learning an update to a predictor serving a version with it (predictor)",
    ),
    (
        "classifyd_model_delivery_seconds",
        "histogram",
        "From the learner publishing a version to a predictor serving it: the part of the staleness after publication (predictor)",
    ),
    (
        "classifyd_model_update_duration_seconds",
        "histogram",
        "Time a predictor took to put a model update in service, by kind (full: a version restored; delta: its rows put in place)",
    ),
    (
        "classifyd_model_swaps_total",
        "counter",
        "Model versions a predictor has put in service",
    ),
    (
        "classifyd_model_published_bytes_total",
        "counter",
        "Bytes a learner has published to the model topic, by kind (full, delta)",
    ),
    (
        "classifyd_model_publications_total",
        "counter",
        "Model versions a learner has published, by kind (full, delta)",
    ),
    (
        "classifyd_model_records_refused_total",
        "counter",
        "Model-topic records a predictor could not use (damaged, other format)",
    ),
    (
        "classifyd_http_requests_total",
        "counter",
        "Requests to POST /v1/classify answered, by status code (--http-addr)",
    ),
    (
        "classifyd_http_request_duration_seconds",
        "histogram",
        "Time from a request's headers to its answer (--http-addr)",
    ),
    (
        "classifyd_http_connections_refused_total",
        "counter",
        "Connections to --http-addr closed unserved, by reason (too_many_connections, too_many_from_address, accept_error)",
    ),
    (
        "classifyd_http_model_version",
        "gauge",
        "The model version requests are answered from (--http-addr): at most one publication behind the learner's",
    ),
    (
        "classifyd_http_model_publications_total",
        "counter",
        "Model versions copied for the requests to be answered from (--http-addr)",
    ),
    (
        "classifyd_http_unkept_total",
        "counter",
        "Requests' predictions not kept for a late label: the queue to the learning loop was full",
    ),
    (
        "classifyd_mail_requests_total",
        "counter",
        "Mail protocol requests answered, by protocol (spamd, rspamd) and command (check, tell, checkv2, learnspam, ...)",
    ),
    (
        "classifyd_mail_request_duration_seconds",
        "histogram",
        "Time from a mail protocol connection's first byte to its answer, by protocol",
    ),
    (
        "classifyd_mail_refused_total",
        "counter",
        "Mail protocol requests and connections refused, by protocol and reason (bad_head, too_large, unauthenticated, timeout, ...)",
    ),
    (
        "classifyd_console_requests_total",
        "counter",
        "Requests to the web console answered (--console-addr), by call (asset, status, history, review, scan, look, model, teach, ...) and status code",
    ),
    ("classifyd_checkpoints_total", "counter", "Checkpoints written"),
    (
        "classifyd_lessons_not_durable_total",
        "counter",
        "Lessons (mail, console) refused because the lessons log could not take them (not learned; the asker retries)",
    ),
    (
        "classifyd_lessons_refused_total",
        "counter",
        "Lessons (mail, console) refused before they were made durable, by reason (unknown_label: a label none of the model's classes)",
    ),
    (
        "classifyd_lessons_forwarding",
        "gauge",
        "On Kafka: 1 while a predictor's lessons reach the learner's topics (the last forward succeeded; 1 on an instance that forwards none), 0 while they are refused",
    ),
    (
        "classifyd_lessons_producer_rebuilds_total",
        "counter",
        "A predictor's lessons producer built anew after the library or the broker gave it up for good (fenced, fatal)",
    ),
    (
        "classifyd_checkpoint_failures_total",
        "counter",
        "Checkpoints that failed or were put off",
    ),
    (
        "classifyd_checkpoint_duration_seconds",
        "histogram",
        "Time to write a checkpoint",
    ),
    (
        "classifyd_checkpoint_size_bytes",
        "gauge",
        "Size of the last checkpoint",
    ),
    (
        "classifyd_checkpoint_timestamp_seconds",
        "gauge",
        "Unix time of the last checkpoint (alert on time() minus this)",
    ),
];
