use super::*;

#[test]
fn a_misspelt_setting_is_refused_with_what_it_was_meant_to_be() {
    for (text, meant) in [
        ("AccountNme=a;AccountKey=AA==", "AccountName"),
        (
            "AccountName=a;AccountKey=AA==;TableEndpont=https://t",
            "TableEndpoint",
        ),
        ("UseDevelopmentStorage=true;TablePrt=1", "TablePort"),
        ("AccountName=a;AccountKey=AA==;Proxxy=http://p:1", "Proxy"),
    ] {
        let error = Account::from_connection_string(text).unwrap_err();
        assert!(
            error
                .to_string()
                .contains(&format!("did you mean `{meant}`")),
            "{text}: {error}"
        );
    }
    // Settings of the Azure SDKs that tablekit does not use are left alone.
    let sas = Account::from_connection_string(
        "BlobEndpoint=https://a.blob.core.windows.net;TableEndpoint=https://a.table.core.windows.net;FileEndpoint=https://a.file.core.windows.net;SharedAccessSignature=sv=1&sig=x",
    );
    assert!(sas.is_ok(), "{sas:?}");
}

#[test]
fn the_emulator_on_other_ports_and_hosts() {
    let account = Account::from_connection_string(
        "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://azurite.local/;QueuePort=21001",
    )
    .unwrap();
    assert_eq!(
        account.table_endpoint,
        "http://azurite.local:10002/devstoreaccount1"
    );
    assert_eq!(
        account.queue_endpoint.as_deref(),
        Some("http://azurite.local:21001/devstoreaccount1")
    );
    for bad in [
        "UseDevelopmentStorage=true;TablePort=0",
        "UseDevelopmentStorage=true;TablePort=70000",
        "UseDevelopmentStorage=true;TablePort=x",
        "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=ftp://h",
        "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://h:1",
        "UseDevelopmentStorage=true;AccountName=other",
        // A certificate for an emulator spoken to over plain HTTP.
        "UseDevelopmentStorage=true;TablePort=10712;CaCertificate=/ca.pem",
        "UseDevelopmentStorage=true;TrustPlatformRoots=true",
        "UseDevelopmentStorage=true;DefaultEndpointsProtocol=ftp",
        "UseDevelopmentStorage=true;DefaultEndpointsProtocol=http;DevelopmentStorageProxyUri=https://h",
    ] {
        let err = Account::from_connection_string(bad).unwrap_err();
        assert!(
            matches!(err, ConfigError::BadValue { .. }),
            "{bad}: {err:?}"
        );
    }
}

#[test]
fn the_emulator_over_https() {
    for text in [
        "UseDevelopmentStorage=true;DefaultEndpointsProtocol=https;TablePort=10712;CaCertificate=/ca.pem",
        "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=https://127.0.0.1;TablePort=10712",
    ] {
        let account = Account::from_connection_string(text).unwrap();
        assert_eq!(
            account.table_endpoint,
            "https://127.0.0.1:10712/devstoreaccount1"
        );
        assert_eq!(
            account.blob_endpoint,
            "https://127.0.0.1:10000/devstoreaccount1"
        );
        assert!(account.is_emulator(&account.table_endpoint));
    }
}

#[test]
fn a_token_account_is_named_by_its_endpoint_never_by_an_address() {
    #[derive(Debug)]
    struct Never;
    #[async_trait::async_trait]
    impl TokenCredential for Never {
        async fn get_token(
            &self,
            _: &str,
        ) -> tablekit_core::Result<crate::credential::AccessToken> {
            Err(tablekit_core::Error::Credential {
                message: "not asked here".into(),
            })
        }
    }
    let token: Arc<dyn TokenCredential> = Arc::new(Never);
    let account =
        Account::with_credential("https://127.0.0.1:10712/devstoreaccount1/", token.clone())
            .unwrap();
    assert_eq!(account.name, "devstoreaccount1");
    assert_eq!(
        account.table_endpoint,
        "https://127.0.0.1:10712/devstoreaccount1"
    );
    assert_eq!(
        account.blob_endpoint,
        "https://127.0.0.1:10000/devstoreaccount1"
    );
    assert!(account.is_emulator(&account.table_endpoint));
    let own = Account::with_credential("https://[::1]:10712/mine", token.clone()).unwrap();
    assert_eq!(own.name, "mine");
    assert!(own.is_emulator(&own.table_endpoint));
    let cloud =
        Account::with_credential("https://acme.table.core.windows.net", token.clone()).unwrap();
    assert!(!cloud.is_emulator(&cloud.table_endpoint));
    for unnamed in [
        "https://127.0.0.1:10712",
        "https://[::1]:10712/",
        "https://localhost:10712",
        "http://acme.table.core.windows.net",
    ] {
        let error = Account::with_credential(unnamed, token.clone()).unwrap_err();
        assert!(
            matches!(&error, ConfigError::BadValue { key, .. } if key == "TableEndpoint"),
            "{unnamed}: {error:?}"
        );
    }
}

/// The form the Azure portal gives for Cosmos DB for Table: an explicit
/// table endpoint with a port and a trailing slash, no blob endpoint.
#[test]
fn cosmos_connection_strings() {
    let cosmos = Account::from_connection_string(&format!(
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={DEV_KEY};TableEndpoint=https://acme.table.cosmos.azure.com:443/;"
    ))
    .unwrap();
    assert_eq!(
        cosmos.table_endpoint,
        "https://acme.table.cosmos.azure.com:443"
    );
    assert_eq!(cosmos.name, "acme");
    assert_eq!(cosmos.blob_endpoint, "https://acme.blob.core.windows.net");
    let sas_only = Account::from_connection_string(
        "TableEndpoint=https://a.table.core.windows.net;SharedAccessSignature=sv=2019-02-02&sig=abc",
    );
    assert_eq!(sas_only, Err(ConfigError::Missing("BlobEndpoint")));
}

#[test]
fn the_emulator_is_told_by_its_account_or_its_path() {
    let dev = Account::from_connection_string("UseDevelopmentStorage=true").unwrap();
    assert!(dev.is_emulator(&dev.table_endpoint));
    let own = Account::from_connection_string(&format!(
        "AccountName=mine;AccountKey={DEV_KEY};TableEndpoint=http://azurite:10002/mine;BlobEndpoint=http://azurite:10000/mine"
    ))
    .unwrap();
    assert!(own.is_emulator(&own.table_endpoint), "{own:?}");
    let cloud = Account::from_connection_string(&format!(
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={DEV_KEY}"
    ))
    .unwrap();
    assert!(!cloud.is_emulator(&cloud.table_endpoint));
    assert!(!cloud.is_emulator("https://acme.table.core.windows.net/"));
    assert!(!cloud.is_emulator("https://proxy.example/tables/acme"));
    assert!(!cloud.is_emulator("https://proxy.example/other"));
}

#[test]
fn connection_strings() {
    let dev = Account::from_connection_string("UseDevelopmentStorage=true").unwrap();
    assert_eq!(dev.name, DEV_ACCOUNT);
    assert_eq!(dev.blob_endpoint, "http://127.0.0.1:10000/devstoreaccount1");

    let explicit = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEV_KEY};BlobEndpoint=http://127.0.0.1:20000/devstoreaccount1;TableEndpoint=http://127.0.0.1:20002/devstoreaccount1/;"
    );
    let account = Account::from_connection_string(&explicit).unwrap();
    assert_eq!(
        account.table_endpoint,
        "http://127.0.0.1:20002/devstoreaccount1"
    );
    assert_eq!(
        account.credentials,
        Account::emulator("x", 1, 2, 3).credentials
    );

    let cloud = Account::from_connection_string(&format!(
        "AccountName=acct;AccountKey={DEV_KEY};EndpointSuffix=core.chinacloudapi.cn"
    ))
    .unwrap();
    assert_eq!(
        cloud.table_endpoint,
        "https://acct.table.core.chinacloudapi.cn"
    );

    assert_eq!(
        dev.queue_endpoint.as_deref(),
        Some("http://127.0.0.1:10001/devstoreaccount1")
    );
    assert_eq!(
        account.queue_endpoint.as_deref(),
        Some("http://devstoreaccount1.queue.core.windows.net"),
        "no QueueEndpoint: the account's own, with the protocol given"
    );
    let queues = Account::from_connection_string(&format!(
        "{explicit}QueueEndpoint=http://127.0.0.1:20001/devstoreaccount1/"
    ))
    .unwrap();
    assert_eq!(
        queues.queue_endpoint.as_deref(),
        Some("http://127.0.0.1:20001/devstoreaccount1")
    );
    let sas = Account::from_connection_string("TableEndpoint=https://a.table.core.windows.net;BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=?sv=2019-02-02&sig=abc").unwrap();
    assert_eq!(sas.queue_endpoint, None);
    assert_eq!(
        sas.credentials,
        Credentials::Sas("sv=2019-02-02&sig=abc".into())
    );
    assert_eq!(
        format!("{:?}", sas.credentials),
        "Sas(…)",
        "secrets are not printed"
    );

    let error: tablekit_core::Error = Account::from_connection_string("AccountName")
        .unwrap_err()
        .into();
    assert!(
        matches!(error, tablekit_core::Error::Configuration { .. }),
        "{error}"
    );
    for bad in [
        "AccountName",
        "AccountName=a",
        "AccountName=a;AccountKey=!!",
        "AccountName=a;AccountName=b;AccountKey=AA==",
        "AccountName=first;AccountKey=AA==;AccountName =second",
        "AccountName=first;AccountKey=AA==; accountname\t=second",
        "UseDevelopmentStorage=maybe",
        "DefaultEndpointsProtocol=ftp;AccountName=a;AccountKey=AA==",
    ] {
        assert!(Account::from_connection_string(bad).is_err(), "{bad}");
    }
}
