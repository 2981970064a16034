//! A local SQS for tests: moto's server on a free loopback port (or the one named by
//! `WC_TEST_SQS_ENDPOINT`), and an SDK client with the fixed credentials it accepts.
//!
//! `moto_server` comes from the pinned test clients that `scripts/test` installs into
//! `.tools/venv` (`$WC_TOOLS_DIR/venv/bin/moto_server`). Without it the helper panics saying
//! so: an SQS test never passes by skipping.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::types::QueueAttributeName;

use crate::outbox::{SqsPublisher, SqsSettings};

/// The region every test queue lives in.
pub const REGION: &str = "us-east-1";

/// Credentials moto accepts (any will do).
pub fn credentials() -> Credentials {
    Credentials::new("wc-test", "wc-test-secret", None, None, "wc-tests")
}

/// A running local SQS endpoint; a server this helper started is killed on drop.
pub struct LocalSqs {
    endpoint: String,
    client: Client,
    server: Option<std::process::Child>,
}

impl std::fmt::Debug for LocalSqs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSqs")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

fn moto_server() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut candidates = Vec::new();
    if let Ok(dir) = std::env::var("WC_TOOLS_DIR") {
        candidates.push(PathBuf::from(dir).join("venv/bin/moto_server"));
    }
    candidates.push(repo.join(".tools/venv/bin/moto_server"));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "moto_server is not installed (looked for {candidates:?}); run scripts/test, which \
                 installs the pinned test clients into .tools/venv, or set WC_TEST_SQS_ENDPOINT"
            )
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// An SDK client for `endpoint` with the test credentials.
pub fn client(endpoint: &str) -> Client {
    Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .credentials_provider(credentials())
            .endpoint_url(endpoint)
            .build(),
    )
}

impl LocalSqs {
    /// `WC_TEST_SQS_ENDPOINT` if set, else a fresh moto server; waits until it answers.
    pub async fn start() -> LocalSqs {
        if let Ok(endpoint) = std::env::var("WC_TEST_SQS_ENDPOINT") {
            let mut sqs = LocalSqs {
                client: client(&endpoint),
                endpoint,
                server: None,
            };
            sqs.wait_ready().await;
            return sqs;
        }
        let bin = moto_server();
        let port = free_port();
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // Its own process group, so dropping the helper ends whatever the server forked.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let endpoint = format!("http://127.0.0.1:{port}");
        let mut sqs = LocalSqs {
            client: client(&endpoint),
            endpoint,
            server: Some(child),
        };
        sqs.wait_ready().await;
        sqs
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.client.list_queues().send().await {
                Ok(_) => return,
                Err(e) => {
                    if let Some(child) = self.server.as_mut()
                        && let Ok(Some(status)) = child.try_wait()
                    {
                        panic!("moto_server exited before answering: {status}");
                    }
                    assert!(
                        Instant::now() < deadline,
                        "the local SQS at {} did not answer within 30 s: {}",
                        self.endpoint,
                        aws_sdk_sqs::error::DisplayErrorContext(&e)
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The SDK client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Settings that reach this endpoint.
    pub fn settings(&self) -> SqsSettings {
        SqsSettings {
            region: REGION.into(),
            endpoint_url: Some(self.endpoint.clone()),
        }
    }

    /// The environment that makes a `wc-local` route the work of runner `client_id` through
    /// `queue_url` here, for both its publisher and its embedded runner. The default AWS
    /// credential chain finds the keys given here first; instance metadata is never asked.
    pub fn wc_local_env(&self, client_id: &str, queue_url: &str) -> Vec<(String, String)> {
        [
            ("WC_RUNNER_SQS_QUEUES", format!("{client_id}={queue_url}")),
            ("WC_SQS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ACCESS_KEY_ID", "wc-test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "wc-test-secret".to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The production publisher, pointed here.
    pub fn publisher(&self) -> SqsPublisher {
        SqsPublisher::with_credentials(&self.settings(), credentials())
    }

    /// Creates a queue with a unique name and returns its URL.
    pub async fn create_queue(&self) -> String {
        let name = format!("wc-test-{}", uuid::Uuid::new_v4().simple());
        self.client
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .expect("create a test queue")
            .queue_url()
            .expect("a created queue has a URL")
            .to_owned()
    }

    /// Receives up to ten messages (bodies and receipt handles) without waiting, hiding them
    /// for `visibility_secs`.
    pub async fn receive(&self, queue_url: &str, visibility_secs: i32) -> Vec<(String, String)> {
        self.client
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(visibility_secs)
            .wait_time_seconds(0)
            .send()
            .await
            .expect("receive from the test queue")
            .messages()
            .iter()
            .map(|m| {
                (
                    m.body().unwrap_or_default().to_owned(),
                    m.receipt_handle().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Sends one message by hand.
    pub async fn send(&self, queue_url: &str, body: &str) {
        self.client
            .send_message()
            .queue_url(queue_url)
            .message_body(body)
            .send()
            .await
            .expect("send to the test queue");
    }

    /// (visible, in flight) message counts.
    pub async fn counts(&self, queue_url: &str) -> (u64, u64) {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("read the test queue's attributes");
        let get = |name: QueueAttributeName| {
            out.attributes()
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} attribute"))
        };
        (
            get(QueueAttributeName::ApproximateNumberOfMessages),
            get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        )
    }

    /// Waits up to `within` for the queue to hold no message, visible or in flight.
    pub async fn wait_empty(&self, queue_url: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let counts = self.counts(queue_url).await;
            if counts == (0, 0) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the queue still holds messages after {within:?}: (visible, in flight) = {counts:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for LocalSqs {
    fn drop(&mut self) {
        if let Some(mut child) = self.server.take() {
            // The server runs in its own process group: end the group, then reap.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
        }
    }
}
