//! RDS IAM database authentication tokens.
//!
//! With IAM auth the password of a connection is a short-lived token: the SigV4-presigned URL
//! `https://{host}:{port}/?Action=connect&DBUser={user}` for the service `rds-db`, valid for 15
//! minutes, with its `https://` prefix removed. It is signed locally (no AWS call) with the
//! credentials of the default chain, which are asked for again for every token because they
//! rotate. A token is a bearer credential: it never prints and is never logged.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use tokio::sync::OnceCell;

use crate::config::percent_encode;

/// How long a token is valid; RDS accepts at most 15 minutes.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// The SigV4 service name of IAM database authentication.
const SERVICE: &str = "rds-db";

/// Why no token could be made.
#[derive(Debug, thiserror::Error)]
pub enum IamAuthError {
    /// The default AWS configuration has no credentials provider at all.
    #[error("no AWS credentials provider is configured for IAM database authentication")]
    NoCredentialsProvider,
    /// The database is not addressed by a TCP host name, which the token is signed for.
    #[error("IAM database authentication needs a TCP host name, not a socket directory")]
    NoTcpHost,
    /// The credentials provider failed.
    #[error("cannot get AWS credentials for IAM database authentication: {0}")]
    Credentials(#[source] aws_credential_types::provider::error::CredentialsError),
    /// Signing failed (a malformed host name, say).
    #[error("cannot sign the IAM database auth token: {0}")]
    Signing(String),
}

/// An RDS IAM auth token. It is as good as a password for 15 minutes, so it never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct IamToken(String);

impl IamToken {
    /// The token text, for handing to the driver as the password. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for IamToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IamToken(<redacted>)")
    }
}

/// A boxed future, as the [`SigningContext`] trait returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where the time and the credentials of a signature come from: the system clock and the
/// default AWS chain in production ([`DefaultAwsChain`]), fixed values in tests.
pub trait SigningContext: Send + Sync + fmt::Debug {
    /// The signing time.
    fn now(&self) -> SystemTime;
    /// Current credentials; asked for once per token.
    fn credentials(&self) -> BoxFuture<'_, Result<Credentials, IamAuthError>>;
}

/// The system clock and the default AWS credential chain (environment, profile, web identity,
/// ECS, IMDS), loaded once per process on first use.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultAwsChain;

/// The default chain's provider, loaded once per process.
static DEFAULT_PROVIDER: OnceCell<Option<SharedCredentialsProvider>> = OnceCell::const_new();

impl SigningContext for DefaultAwsChain {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn credentials(&self) -> BoxFuture<'_, Result<Credentials, IamAuthError>> {
        Box::pin(async {
            let provider = DEFAULT_PROVIDER
                .get_or_init(|| async {
                    aws_config::defaults(aws_config::BehaviorVersion::latest())
                        .load()
                        .await
                        .credentials_provider()
                })
                .await
                .as_ref()
                .ok_or(IamAuthError::NoCredentialsProvider)?;
            provider
                .provide_credentials()
                .await
                .map_err(IamAuthError::Credentials)
        })
    }
}

/// Makes tokens for one database user at one endpoint.
#[derive(Clone, Debug)]
pub struct IamTokenSigner {
    host: String,
    port: u16,
    user: String,
    region: String,
    context: Arc<dyn SigningContext>,
}

impl IamTokenSigner {
    /// A signer for `user` at `host:port` in `region`, with time and credentials from `context`.
    pub fn new(
        host: &str,
        port: u16,
        user: &str,
        region: &str,
        context: Arc<dyn SigningContext>,
    ) -> Self {
        Self {
            host: host.to_owned(),
            port,
            user: user.to_owned(),
            region: region.to_owned(),
            context,
        }
    }

    /// A fresh token, signed now with current credentials.
    pub async fn token(&self) -> Result<IamToken, IamAuthError> {
        let credentials = self.context.credentials().await?;
        sign_token(
            &self.host,
            self.port,
            &self.user,
            &self.region,
            credentials,
            self.context.now(),
        )
    }
}

/// Signs the token for `user` at `host:port` in `region` with `credentials` at `time`.
pub fn sign_token(
    host: &str,
    port: u16,
    user: &str,
    region: &str,
    credentials: Credentials,
    time: SystemTime,
) -> Result<IamToken, IamAuthError> {
    let signing_error = |e: &dyn fmt::Display| IamAuthError::Signing(e.to_string());
    // The endpoint and action being authorized, before the signature is added.
    let unsigned = format!(
        "{host}:{port}/?Action=connect&DBUser={}",
        percent_encode(user)
    );
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_LIFETIME);
    let identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| signing_error(&e))?
        .into();
    let request = SignableRequest::new(
        "GET",
        format!("https://{unsigned}"),
        std::iter::empty(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| signing_error(&e))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| signing_error(&e))?
        .into_parts();
    let mut token = unsigned;
    for (name, value) in instructions.params() {
        token.push('&');
        token.push_str(name);
        token.push('=');
        token.push_str(&percent_encode(value));
    }
    Ok(IamToken(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-05-06T07:08:09Z.
    fn fixed_time() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_979_289)
    }

    fn credentials(session_token: Option<&str>) -> Credentials {
        Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session_token.map(str::to_owned),
            None,
            "test",
        )
    }

    fn query_value<'a>(token: &'a str, name: &str) -> Option<&'a str> {
        let (_, query) = token.split_once('?')?;
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    }

    #[test]
    fn token_has_the_rds_shape() {
        let token = sign_token(
            "proxy.example.eu-west-1.rds.amazonaws.com",
            5432,
            "wc_app",
            "eu-west-1",
            credentials(None),
            fixed_time(),
        )
        .unwrap();
        let text = token.expose();
        assert!(!text.starts_with("https://"), "{text}");
        let prefix =
            "proxy.example.eu-west-1.rds.amazonaws.com:5432/?Action=connect&DBUser=wc_app&";
        assert!(text.starts_with(prefix), "{text}");
        assert_eq!(
            query_value(text, "X-Amz-Algorithm"),
            Some("AWS4-HMAC-SHA256")
        );
        assert_eq!(
            query_value(text, "X-Amz-Credential"),
            Some("AKIDEXAMPLE%2F20240506%2Feu-west-1%2Frds-db%2Faws4_request")
        );
        assert_eq!(query_value(text, "X-Amz-Date"), Some("20240506T070809Z"));
        assert_eq!(query_value(text, "X-Amz-Expires"), Some("900"));
        assert_eq!(query_value(text, "X-Amz-SignedHeaders"), Some("host"));
        let signature = query_value(text, "X-Amz-Signature").unwrap();
        assert_eq!(signature.len(), 64, "{text}");
        assert!(
            signature
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("X-Amz-Signature={signature}")),
            "{text}"
        );
        assert_eq!(format!("{token:?}"), "IamToken(<redacted>)");
    }

    #[test]
    fn token_is_deterministic_and_carries_a_session_token() {
        let sign_at = |time| {
            sign_token(
                "db.internal",
                6432,
                "app user",
                "us-east-1",
                credentials(Some("session/token+x")),
                time,
            )
            .unwrap()
        };
        let a = sign_at(fixed_time());
        assert_eq!(a, sign_at(fixed_time()));
        assert_ne!(a, sign_at(fixed_time() + Duration::from_secs(1)));
        let text = a.expose();
        assert!(text.starts_with("db.internal:6432/?Action=connect&DBUser=app%20user&"));
        assert_eq!(
            query_value(text, "X-Amz-Security-Token"),
            Some("session%2Ftoken%2Bx")
        );
    }

    #[tokio::test]
    async fn signer_signs_afresh_each_time() {
        let signer = IamTokenSigner::new(
            "db.internal",
            5432,
            "wc",
            "eu-central-1",
            Arc::new(crate::testing::FixedSigning::ticking_from(fixed_time())),
        );
        let first = signer.token().await.unwrap();
        let second = signer.token().await.unwrap();
        assert_ne!(first, second);
        assert_eq!(
            query_value(first.expose(), "X-Amz-Date"),
            Some("20240506T070809Z")
        );
        assert_eq!(
            query_value(second.expose(), "X-Amz-Date"),
            Some("20240506T070810Z")
        );
    }
}
