//! The adapter against a vault played in the process: an HTTP transport of
//! the Azure SDK that answers as Key Vault does (the sign-in challenge,
//! `wrapkey` and `unwrapkey` by key version), so every request the
//! adapter makes is the SDK's own, sent to `https://…vault.azure.net`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
use azure_core::http::headers::{AUTHORIZATION, HeaderName, Headers, WWW_AUTHENTICATE};
use azure_core::http::{
    AsyncRawResponse, Body, ClientOptions, HttpClient, Request, StatusCode, Transport,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::*;
use crate::seal::{open_entity, seal_entity};
use tablekit_core::{Entity, Value};

const VAULT: &str = "https://tablekit-test.vault.azure.net";

/// A vault of AES keys by (name, version); it wraps with RFC 3394 (the
/// adapter does not look inside a wrapped key), records the paths asked.
#[derive(Debug, Default)]
struct Vault {
    keys: HashMap<(String, String), [u8; 32]>,
    asked: Mutex<Vec<String>>,
}

impl Vault {
    fn answer(&self, request: &Request) -> (StatusCode, Headers, String) {
        let path = request.url().path().to_owned();
        self.asked.lock().unwrap().push(path.clone());
        let mut headers = Headers::new();
        if request.headers().get_optional_str(&AUTHORIZATION) != Some("Bearer token-1") {
            headers.insert(
                WWW_AUTHENTICATE,
                r#"Bearer authorization="https://login.microsoftonline.com/tenant", resource="https://vault.azure.net""#,
            );
            return (StatusCode::Unauthorized, headers, String::new());
        }
        headers.insert(HeaderName::from_static("content-type"), "application/json");
        let body = match request.body() {
            Body::Bytes(bytes) => serde_json::from_slice::<serde_json::Value>(bytes).unwrap(),
            _ => panic!("a streamed body"),
        };
        let value = URL_SAFE_NO_PAD
            .decode(body["value"].as_str().unwrap().trim_end_matches('='))
            .unwrap();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let ["keys", name, version, operation] = parts.as_slice() else {
            return (StatusCode::NotFound, headers, String::new());
        };
        let Some(key) = self.keys.get(&((*name).to_owned(), (*version).to_owned())) else {
            let error = r#"{"error":{"code":"KeyNotFound","message":"no such key"}}"#;
            return (StatusCode::NotFound, headers, error.into());
        };
        assert_eq!(body["alg"], "RSA-OAEP-256");
        let kek = aes_kw::KekAes256::from(*key);
        let result = match *operation {
            "wrapkey" => kek.wrap_vec(&value).unwrap(),
            "unwrapkey" => match kek.unwrap_vec(&value) {
                Ok(key) => key,
                Err(_) => {
                    let error = r#"{"error":{"code":"BadParameter","message":"unwrap failed"}}"#;
                    return (StatusCode::BadRequest, headers, error.into());
                }
            },
            _ => return (StatusCode::NotFound, headers, String::new()),
        };
        let kid = format!("{VAULT}/keys/{name}/{version}");
        let out = serde_json::json!({ "kid": kid, "value": URL_SAFE_NO_PAD.encode(result) });
        (StatusCode::Ok, headers, out.to_string())
    }
}

#[async_trait::async_trait]
impl HttpClient for Vault {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let (status, headers, body) = self.answer(request);
        Ok(AsyncRawResponse::from_bytes(
            status,
            headers,
            body.into_bytes(),
        ))
    }
}

/// A credential that always has the same token.
#[derive(Debug)]
struct Token;

#[async_trait::async_trait]
impl TokenCredential for Token {
    async fn get_token(
        &self,
        scopes: &[&str],
        _: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        assert_eq!(scopes, ["https://vault.azure.net/.default"]);
        let expires =
            azure_core::time::OffsetDateTime::now_utc() + std::time::Duration::from_secs(3600);
        Ok(AccessToken::new("token-1", expires))
    }
}

fn keys(vault: Arc<Vault>, current: &str) -> KeyVaultKeys {
    let options = KeyClientOptions {
        client_options: ClientOptions {
            transport: Some(Transport::new(vault)),
            ..Default::default()
        },
        ..Default::default()
    };
    KeyVaultKeys::new(
        &format!("{VAULT}/keys/{current}"),
        Arc::new(Token),
        Some(options),
    )
    .unwrap()
    .with_index_key(IndexKey::new([4; 32]))
}

fn vault() -> Arc<Vault> {
    let mut vault = Vault::default();
    vault.keys.insert(("kek".into(), "v1".into()), [1; 32]);
    vault.keys.insert(("kek".into(), "v2".into()), [2; 32]);
    Arc::new(vault)
}

#[tokio::test]
async fn rows_sealed_under_a_vault_key_open_under_its_version_after_a_rotation() {
    let vault = vault();
    let v1 = keys(Arc::clone(&vault), "kek/v1");
    let mut row = Entity::new("p", "r").with("Email", "ada@example.com");
    seal_entity(&mut row, "People", &["Email"], &v1)
        .await
        .unwrap();
    let Some(Value::String(envelope)) = row.get(crate::ENVELOPE_PROPERTY).cloned() else {
        panic!("an envelope");
    };
    assert!(
        envelope.contains(&format!("{VAULT}/keys/kek/v1")),
        "{envelope}"
    );
    assert!(envelope.contains("RSA-OAEP-256"), "{envelope}");

    // The vault's key rotated: v2 is current, and rows of v1 still open.
    let v2 = keys(Arc::clone(&vault), "kek/v2");
    let mut opened = row.clone();
    open_entity(&mut opened, "People", &["Email"], &v2)
        .await
        .unwrap();
    assert_eq!(opened.get("Email"), Some(&Value::from("ada@example.com")));
    let asked = vault.asked.lock().unwrap().clone();
    assert!(
        asked.contains(&"/keys/kek/v1/wrapkey".to_owned()),
        "{asked:?}"
    );
    assert!(
        asked.contains(&"/keys/kek/v1/unwrapkey".to_owned()),
        "{asked:?}"
    );
    assert_eq!(
        v2.index_key().await.unwrap().hash("x"),
        IndexKey::new([4; 32]).hash("x")
    );
}

#[tokio::test]
async fn a_vault_refusal_is_a_typed_error_without_a_key() {
    let vault = vault();
    let v1 = keys(Arc::clone(&vault), "kek/v1");
    let content = ContentKey::from_bytes([9; 32]);
    let wrapped = v1
        .wrap(&format!("{VAULT}/keys/kek/v1"), &content)
        .await
        .unwrap();
    // Unwrapped under another version: the vault refuses it.
    let wrong = v1.unwrap(&format!("{VAULT}/keys/kek/v2"), &wrapped).await;
    assert!(
        matches!(wrong, Err(EncryptionError::WrongKey { .. })),
        "{wrong:?}"
    );
    // A version the vault does not have.
    let gone = v1.unwrap(&format!("{VAULT}/keys/kek/v9"), &wrapped).await;
    match gone {
        Err(EncryptionError::Resolver { message }) => {
            assert!(
                message.contains("404") || message.contains("Not Found"),
                "{message}"
            );
            assert!(!message.contains("value"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A key of another vault, and ids that are not a key's.
    let other = v1
        .unwrap("https://elsewhere.vault.azure.net/keys/kek/v1", &wrapped)
        .await;
    assert!(
        matches!(other, Err(EncryptionError::UnknownKey { .. })),
        "{other:?}"
    );
    for bad in [
        "kek",
        "http://tablekit-test.vault.azure.net/keys/kek/v1",
        "https://tablekit-test.vault.azure.net/keys/kek",
        "https://tablekit-test.vault.azure.net/secrets/kek/v1",
    ] {
        let made = KeyVaultKeys::new(bad, Arc::new(Token), None);
        assert!(matches!(made, Err(EncryptionError::BadKey { .. })), "{bad}");
    }
    let shown = format!("{v1:?}");
    assert!(
        shown.contains("kek/v1") && !shown.contains("IndexKey("),
        "{shown}"
    );
}
