//! Keys for the symbol buckets of a service that runs under a role (a container's task
//! role, a Kubernetes pod's web identity, an instance profile) rather than with keys in its
//! environment: the buckets' requests are signed by the sources crate, which fetches no
//! credentials itself, so the service hands it object_store's own credential provider —
//! the one its blob store signs with — which fetches and renews them as they expire.

use std::sync::Arc;

use object_store::aws::{AmazonS3Builder, AwsCredentialProvider};
use sources::s3::KeySource;

use crate::store::StoreError;

/// object_store's credential provider for one bucket, asked from blocking threads.
pub struct RoleKeys {
    provider: AwsCredentialProvider,
    runtime: tokio::runtime::Handle,
}

impl RoleKeys {
    /// The credentials object_store finds in this environment for `bucket`; made on the
    /// service's runtime, whose handle it keeps to fetch them later.
    pub fn for_bucket(bucket: &str) -> Result<Arc<RoleKeys>, StoreError> {
        let refuse = |reason: String| StoreError::BlobUrl {
            url: format!("s3://{bucket}"),
            reason,
        };
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| refuse(format!("no runtime to fetch credentials on: {e}")))?;
        let s3 = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| refuse(e.to_string()))?;
        Ok(Arc::new(RoleKeys {
            provider: Arc::clone(s3.credentials()),
            runtime,
        }))
    }
}

impl KeySource for RoleKeys {
    /// Blocks on the service's runtime: called from its blocking threads, where the
    /// sources crate fetches files.
    fn keys(&self) -> Result<(String, String, Option<String>), String> {
        let c = self
            .runtime
            .block_on(self.provider.get_credential())
            .map_err(|e| e.to_string())?;
        Ok((c.key_id.clone(), c.secret_key.clone(), c.token.clone()))
    }
}
