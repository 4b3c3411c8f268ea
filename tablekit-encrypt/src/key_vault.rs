//! Key-encryption keys kept in Azure Key Vault (or a Managed HSM), through
//! the Azure SDK for Rust: content keys are wrapped and unwrapped by the
//! vault, and the key never leaves it.

use std::str::FromStr;
use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use azure_core::http::Url;
use azure_security_keyvault_keys::models::{
    EncryptionAlgorithm, KeyClientUnwrapKeyOptions, KeyClientWrapKeyOptions, KeyOperationParameters,
};
use azure_security_keyvault_keys::{KeyClient, KeyClientOptions};

use crate::keys::{ContentKey, IndexKey, KeyResolver, WrappedKey};
use tablekit_core::EncryptionError;

/// A [`KeyResolver`] whose key-encryption keys are Azure Key Vault keys:
/// each content key is wrapped by the vault's `wrapKey` operation under the
/// current key (RSA-OAEP-256 by default, for an RSA key), and unwrapped by
/// `unwrapKey` under the key version its row names. The key's full id,
/// version and all (`https://{vault}.vault.azure.net/keys/{name}/{version}`),
/// is what rows record: after a rotation in the vault (a new version made
/// current here), the rows of older versions still read, as long as the
/// vault keeps them enabled.
///
/// It signs in with a token credential of the Azure SDK (from
/// `azure_identity`: the one the REST backend's sign-in takes), which needs
/// the `wrapKey` and `unwrapKey` permissions on the key (the "Key Vault
/// Crypto User" role). The vault gives no key for the hashes of indexed
/// encrypted values: give one with [`with_index_key`](KeyVaultKeys::with_index_key)
/// (kept as a secret, in the vault's secrets say).
///
/// Errors of the vault are [`EncryptionError::Resolver`], with the status
/// and the service's error code, never a key.
pub struct KeyVaultKeys {
    client: KeyClient,
    /// The vault's endpoint (`https://{vault}.vault.azure.net`).
    vault: String,
    /// The current key's id, version and all.
    current: String,
    algorithm: EncryptionAlgorithm,
    index: Option<IndexKey>,
}

impl std::fmt::Debug for KeyVaultKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyVaultKeys")
            .field("current", &self.current)
            .field("algorithm", &self.algorithm.as_ref())
            .finish_non_exhaustive()
    }
}

impl KeyVaultKeys {
    /// The keys of the vault that holds `key_id`, the full id of the
    /// current key (with its version), signed in with `credential`.
    /// `options` sets the client's (its HTTP transport and retries, say).
    pub fn new(
        key_id: &str,
        credential: Arc<dyn TokenCredential>,
        options: Option<KeyClientOptions>,
    ) -> Result<KeyVaultKeys, EncryptionError> {
        let (vault, _, _) = parse_key_id(key_id)?;
        let client = KeyClient::new(&vault, credential, options).map_err(resolver_error)?;
        Ok(KeyVaultKeys {
            client,
            vault,
            current: key_id.to_owned(),
            algorithm: EncryptionAlgorithm::RsaOaep256,
            index: None,
        })
    }

    /// The keys with `algorithm` as the wrap algorithm of new writes
    /// (`RSA-OAEP-256` by default; `A256KW` for an AES key of a Managed
    /// HSM). Rows record the algorithm they were wrapped with.
    pub fn with_algorithm(mut self, algorithm: &str) -> KeyVaultKeys {
        self.algorithm = algorithm_named(algorithm);
        self
    }

    /// The keys with `key` as their [index key](IndexKey).
    pub fn with_index_key(mut self, key: IndexKey) -> KeyVaultKeys {
        self.index = Some(key);
        self
    }

    /// The name and version of `key_id`, a key of this vault.
    fn name_and_version(&self, key_id: &str) -> Result<(String, String), EncryptionError> {
        match parse_key_id(key_id) {
            Ok((vault, name, version)) if vault == self.vault => Ok((name, version)),
            _ => Err(EncryptionError::UnknownKey {
                key_id: key_id.to_owned(),
            }),
        }
    }
}

/// The vault's endpoint, the key's name and its version, from a key id
/// `https://{vault}/keys/{name}/{version}`.
fn parse_key_id(key_id: &str) -> Result<(String, String, String), EncryptionError> {
    let bad = || EncryptionError::BadKey {
        reason: format!(
            "`{key_id}` is not a Key Vault key id with its version (https://{{vault}}/keys/{{name}}/{{version}})"
        ),
    };
    let url = Url::parse(key_id).map_err(|_| bad())?;
    let segments: Vec<&str> = url.path_segments().map_or_else(Vec::new, Iterator::collect);
    match (url.scheme(), url.host_str(), segments.as_slice()) {
        ("https", Some(host), ["keys", name, version])
            if !name.is_empty() && !version.is_empty() =>
        {
            let vault = match url.port() {
                Some(port) => format!("https://{host}:{port}"),
                None => format!("https://{host}"),
            };
            Ok((vault, (*name).to_owned(), (*version).to_owned()))
        }
        _ => Err(bad()),
    }
}

/// The algorithm `name` (one the SDK does not know is sent as named, for
/// the vault to judge).
fn algorithm_named(name: &str) -> EncryptionAlgorithm {
    EncryptionAlgorithm::from_str(name).unwrap_or_else(|never| match never {})
}

/// A vault's error as the resolver's: its kind, status and error code, and
/// nothing of the request or the response's body.
fn resolver_error(e: azure_core::Error) -> EncryptionError {
    let message = match e.kind() {
        azure_core::error::ErrorKind::HttpResponse {
            status, error_code, ..
        } => format!(
            "Key Vault answered {status}{}",
            error_code
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        ),
        kind => format!("Key Vault: {kind}"),
    };
    EncryptionError::Resolver { message }
}

#[async_trait::async_trait]
impl KeyResolver for KeyVaultKeys {
    fn current_key_id(&self) -> &str {
        &self.current
    }

    async fn wrap(&self, key_id: &str, key: &ContentKey) -> Result<WrappedKey, EncryptionError> {
        let (name, version) = self.name_and_version(key_id)?;
        let parameters = KeyOperationParameters {
            algorithm: Some(self.algorithm.clone()),
            value: Some(key.as_bytes().to_vec()),
            ..Default::default()
        };
        let options = KeyClientWrapKeyOptions {
            key_version: Some(version),
            ..Default::default()
        };
        let request = parameters.try_into().map_err(resolver_error)?;
        let response =
            (self.client.wrap_key(&name, request, Some(options)).await).map_err(resolver_error)?;
        let result = response.into_model().map_err(resolver_error)?;
        let bytes = result.result.ok_or_else(|| EncryptionError::Resolver {
            message: "Key Vault returned no wrapped key".into(),
        })?;
        Ok(WrappedKey {
            algorithm: self.algorithm.as_ref().to_owned(),
            bytes,
        })
    }

    async fn unwrap(
        &self,
        key_id: &str,
        wrapped: &WrappedKey,
    ) -> Result<ContentKey, EncryptionError> {
        let (name, version) = self.name_and_version(key_id)?;
        let algorithm = algorithm_named(&wrapped.algorithm);
        let parameters = KeyOperationParameters {
            algorithm: Some(algorithm),
            value: Some(wrapped.bytes.clone()),
            ..Default::default()
        };
        let request = parameters.try_into().map_err(resolver_error)?;
        let options = KeyClientUnwrapKeyOptions::default();
        let response = (self
            .client
            .unwrap_key(&name, &version, request, Some(options))
            .await)
            .map_err(|e| match e.http_status() {
                // The vault refuses a wrapped key it did not wrap.
                Some(azure_core::http::StatusCode::BadRequest) => EncryptionError::WrongKey {
                    key_id: key_id.to_owned(),
                },
                _ => resolver_error(e),
            })?;
        let result = response.into_model().map_err(resolver_error)?;
        let bytes = zeroize::Zeroizing::new(result.result.unwrap_or_default());
        let bytes: [u8; 32] =
            bytes
                .as_slice()
                .try_into()
                .map_err(|_| EncryptionError::WrongKey {
                    key_id: key_id.to_owned(),
                })?;
        Ok(ContentKey::from_bytes(bytes))
    }

    async fn index_key(&self) -> Result<IndexKey, EncryptionError> {
        self.index.clone().ok_or(EncryptionError::NoIndexKey)
    }
}

#[cfg(test)]
mod tests;
