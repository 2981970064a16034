//! Receiving work from SQS.
//!
//! A message carries only a [`QueueEnvelope`] (the work id); the work itself comes from the
//! runner API's `claim`, which leases it to this instance exactly once (`queued → leased`).
//! SQS delivers at least once, so every message is handled as a possible duplicate:
//!
//! - a malformed message, or one whose work the server does not know, is deleted unrun;
//! - work already claimed (by this or another instance, or finished or stopped) is answered
//!   `already_claimed`: the message is deleted and nothing runs;
//! - claimed work runs exactly like polled work; its message stays hidden while it runs
//!   (`ChangeMessageVisibility` every third of the visibility timeout) and is deleted once the
//!   server settled the result. A result that never reached the server leaves the message: its
//!   next delivery is answered `already_claimed` and deleted, so nothing is run twice.
//!
//! A claim that failed for a transient reason leaves the message too; it returns after its
//! visibility timeout (and, with a redrive policy, ends in the dead-letter queue).

use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use uuid::Uuid;
use wc_runner_protocol::{ClaimRequest, ClaimResponse, Lease, QueueEnvelope};

use crate::client::{Api, ApiFailure};
use crate::config::RunnerConfig;

/// Most messages one ReceiveMessage returns (an SQS limit).
pub const MAX_RECEIVE: u32 = 10;
/// Longest long-poll wait SQS allows.
const MAX_WAIT_SECS: u64 = 20;
/// Longest visibility timeout SQS allows (12 hours).
const MAX_VISIBILITY_SECS: u64 = 12 * 3600;

/// How the runner receives from its queue: the agent's options that concern SQS.
#[derive(Debug, Clone)]
pub struct ReceiveSettings {
    /// Long-poll wait (`WaitTimeSeconds`, whole seconds up to 20).
    pub wait: Duration,
    /// How long a received message stays hidden (whole seconds); extended every third of it
    /// while its work runs.
    pub visibility: Duration,
    /// Fixed credentials instead of the default AWS chain (tests against a local server).
    pub credentials: Option<aws_sdk_sqs::config::Credentials>,
}

/// The runner's queue.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    url: String,
    wait_secs: i32,
    visibility_secs: i32,
}

/// One received message whose work this instance claimed.
#[derive(Debug)]
pub struct Delivery {
    queue: SqsQueue,
    receipt: String,
    message_id: String,
    work_id: Uuid,
}

/// Keeps a message hidden while its work runs; stops when dropped.
#[derive(Debug)]
pub struct Hidden(tokio::task::JoinHandle<()>);

impl Drop for Hidden {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn timeouts(wait_secs: i32) -> aws_sdk_sqs::config::timeout::TimeoutConfig {
    // An attempt must outlast the long poll.
    let attempt = Duration::from_secs(wait_secs.max(0) as u64 + 10);
    aws_sdk_sqs::config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(attempt)
        .operation_timeout(attempt * 2)
        .build()
}

impl SqsQueue {
    /// The client for the queue at `url`, with `cfg`'s endpoint override and signing region
    /// and the default AWS credential chain, or `settings.credentials` when given.
    pub async fn connect(url: String, cfg: &RunnerConfig, settings: &ReceiveSettings) -> SqsQueue {
        let wait_secs = settings.wait.as_secs().min(MAX_WAIT_SECS) as i32;
        let visibility_secs = settings.visibility.as_secs().clamp(1, MAX_VISIBILITY_SECS) as i32;
        let region = cfg.sqs_signing_region();
        let client = match &settings.credentials {
            Some(credentials) => {
                let mut conf = aws_sdk_sqs::Config::builder()
                    .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
                    .region(aws_sdk_sqs::config::Region::new(region))
                    .credentials_provider(credentials.clone())
                    .timeout_config(timeouts(wait_secs));
                if let Some(endpoint) = &cfg.sqs_endpoint_url {
                    conf = conf.endpoint_url(endpoint);
                }
                Client::from_conf(conf.build())
            }
            None => {
                let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .region(aws_config::Region::new(region))
                    .timeout_config(timeouts(wait_secs));
                if let Some(endpoint) = &cfg.sqs_endpoint_url {
                    loader = loader.endpoint_url(endpoint);
                }
                Client::new(&loader.load().await)
            }
        };
        SqsQueue {
            client,
            url,
            wait_secs,
            visibility_secs,
        }
    }

    /// Long-polls for up to `free` messages (at most [`MAX_RECEIVE`]) and claims the work of
    /// each through the runner API. Returns the claimed work with its message; duplicates and
    /// malformed messages are deleted on the way. A refused token or a replaced instance ends
    /// the receive with that failure; SQS failures are transport failures (retried).
    pub async fn receive(
        &self,
        api: &Api,
        instance_id: Uuid,
        free: u32,
    ) -> Result<Vec<(Lease, Delivery)>, ApiFailure> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(free.clamp(1, MAX_RECEIVE) as i32)
            .wait_time_seconds(self.wait_secs)
            .visibility_timeout(self.visibility_secs)
            .send()
            .await
            .map_err(|e| {
                ApiFailure::Transport(format!("sqs receive: {}", DisplayErrorContext(&e)))
            })?;
        let mut claimed = Vec::new();
        for m in out.messages.unwrap_or_default() {
            let Some(receipt) = m.receipt_handle else {
                continue;
            };
            let message_id = m.message_id.unwrap_or_default();
            let envelope = match QueueEnvelope::parse(m.body.as_deref().unwrap_or_default()) {
                Ok(e) => e,
                Err(why) => {
                    tracing::warn!(%message_id, error = %why, "malformed queue message; deleting it");
                    self.delete(&receipt, &message_id).await;
                    continue;
                }
            };
            let work_id = envelope.work_id;
            let req = ClaimRequest {
                instance_id,
                work_id,
            };
            match api
                .call::<_, ClaimResponse>("claim", &req, Duration::from_secs(30))
                .await
            {
                Ok(ClaimResponse::Claimed { lease }) => claimed.push((
                    *lease,
                    Delivery {
                        queue: self.clone(),
                        receipt,
                        message_id,
                        work_id,
                    },
                )),
                Ok(ClaimResponse::AlreadyClaimed { state }) => {
                    tracing::info!(%work_id, %message_id, ?state, "duplicate delivery (already claimed); deleting it unrun");
                    self.delete(&receipt, &message_id).await;
                }
                Err(ApiFailure::Refused { kind, message }) if kind == "unknown_work" => {
                    tracing::warn!(%work_id, %message_id, %message, "the server knows no such work for this runner; deleting the message");
                    self.delete(&receipt, &message_id).await;
                }
                Err(e @ (ApiFailure::Unauthorized(_) | ApiFailure::Replaced(_))) => return Err(e),
                Err(e) => {
                    tracing::warn!(%work_id, %message_id, error = %e, "claim failed; the message returns after its visibility timeout");
                }
            }
        }
        Ok(claimed)
    }

    async fn delete(&self, receipt: &str, message_id: &str) {
        if let Err(e) = self
            .client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .send()
            .await
        {
            tracing::warn!(%message_id, error = %DisplayErrorContext(&e), "could not delete the queue message");
        }
    }
}

impl Delivery {
    /// Extends the message's visibility every third of the visibility timeout until the
    /// returned guard is dropped, so it is not delivered again while its work runs.
    pub fn keep_hidden(&self) -> Hidden {
        let queue = self.queue.clone();
        let receipt = self.receipt.clone();
        let work_id = self.work_id;
        let every = Duration::from_secs(queue.visibility_secs as u64) / 3;
        Hidden(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = queue
                    .client
                    .change_message_visibility()
                    .queue_url(&queue.url)
                    .receipt_handle(&receipt)
                    .visibility_timeout(queue.visibility_secs)
                    .send()
                    .await
                {
                    tracing::warn!(%work_id, error = %DisplayErrorContext(&e), "could not extend the message's visibility");
                }
            }
        }))
    }

    /// Ends the delivery once its work ended: deletes the message if the server settled the
    /// result (`settled`), else leaves it for a redelivery that the claim answers
    /// `already_claimed`.
    pub async fn finish(self, settled: bool) {
        if settled {
            self.queue.delete(&self.receipt, &self.message_id).await;
        } else {
            tracing::warn!(work_id = %self.work_id, "the result was not delivered; the message is left for redelivery, which will not run the work again");
        }
    }
}
