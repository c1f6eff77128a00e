//! The storage boundary, on both backends: the store names the unique rule
//! that refused a write, reads a word outside its closed set as corrupt
//! data, and hands out conversation and history reads only to the owner.

use crate::helpers::*;
use warden::domain::capability::{CapabilityId, LifecycleStatus, RevisionChange};
use warden::store::capabilities::{GuardedWriteError, NewCapability, RevisedDefinition};
use warden::store::idempotency::{Claim, Completion};
use warden::store::{Constraint, Store, StoreError};

/// Runs one statement on whichever backend the store is.
async fn execute(store: &Store, sql: &str) {
    match store {
        Store::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
        Store::Postgres(pool) => sqlx::query(sql).execute(pool.pool()).await.map(|_| ()),
    }
    .unwrap();
}

/// Publishes one capability named `name` under a fresh idempotency key.
async fn publish(
    store: &Store,
    account: &warden::domain::account::AccountId,
    name: &str,
) -> Result<CapabilityId, StoreError> {
    let key = format!("key-{name}-{}", uuid::Uuid::new_v4().simple());
    assert_eq!(
        store
            .claim_idempotency_key(account, &key, "hash")
            .await
            .unwrap(),
        Claim::Fresh
    );
    let id = CapabilityId::generate();
    let capability = NewCapability {
        id: id.clone(),
        name: name.into(),
        definition: "{}".into(),
        credential_ref: None,
    };
    let completion = Completion {
        key: &key,
        status: 201,
        body: "{}",
    };
    store
        .publish_capabilities(account, "orders", &[capability], &completion)
        .await
        .map(|()| id)
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_names_the_unique_rule_that_refused_a_write(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    match store.create_account("acme").await {
        Err(StoreError::Conflict(Constraint::AccountName)) => {}
        other => panic!("a second account named acme: {other:?}"),
    }

    let first = publish(&store, &account, "order_status").await.unwrap();
    match publish(&store, &account, "order_status").await {
        Err(StoreError::Conflict(Constraint::CapabilityName)) => {}
        other => panic!("a second capability named order_status: {other:?}"),
    }
    // Another account may use the name.
    let other = store.create_account("globex").await.unwrap();
    publish(&store, &other, "order_status").await.unwrap();

    // A revision that takes a sibling's name is refused as such.
    let second = publish(&store, &account, "order_lines").await.unwrap();
    let renamed = store
        .revise_capability(
            &account,
            &second,
            1,
            &RevisedDefinition {
                domain: "orders",
                name: "order_status",
                definition: "{}",
                credential_ref: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(renamed.unwrap_err(), GuardedWriteError::NameTaken);

    // Any other unique rule is a conflict that names no domain rule.
    store
        .insert_api_key(&account, "key_a", "hash_a", "prod")
        .await
        .unwrap();
    match store
        .insert_api_key(&account, "key_a", "hash_b", "prod")
        .await
    {
        Err(StoreError::Conflict(Constraint::Other(rule))) => {
            assert!(rule.contains("key"), "the rule is named for logs: {rule}");
        }
        other => panic!("a reused key id: {other:?}"),
    }
    assert!(
        store
            .get_capability(&account, &first)
            .await
            .unwrap()
            .is_some()
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_word_outside_its_closed_set_reads_as_corrupt(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let account = store.create_account("acme").await.unwrap();
    let id = publish(&store, &account, "order_status").await.unwrap();
    let row = store.get_capability(&account, &id).await.unwrap().unwrap();
    assert_eq!(row.lifecycle_status, LifecycleStatus::Active);
    let history = store.capability_history(&account, &id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (history[0].change, history[0].lifecycle_status),
        (RevisionChange::Created, LifecycleStatus::Active)
    );

    execute(
        &store,
        "UPDATE capabilities SET lifecycle_status = 'archived'",
    )
    .await;
    match store.get_capability(&account, &id).await {
        Err(StoreError::Corrupt(why)) => assert!(why.contains("archived"), "{why}"),
        other => panic!("an unknown lifecycle status: {other:?}"),
    }
    assert!(
        !StoreError::Corrupt(String::new()).is_unavailable(),
        "corrupt data is a 500, not a retry"
    );
}

#[apply(backends)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_and_conversation_reads_answer_only_their_owner(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let owner = store.create_account("acme").await.unwrap();
    let stranger = store.create_account("globex").await.unwrap();
    let id = publish(&store, &owner, "order_status").await.unwrap();
    assert_eq!(
        store.capability_history(&owner, &id).await.unwrap().len(),
        1
    );
    assert!(
        store
            .capability_history(&stranger, &id)
            .await
            .unwrap()
            .is_empty(),
        "another account's history is not read"
    );

    execute(
        &store,
        &format!(
            "INSERT INTO conversations (id, account_id, user_id, created_at, updated_at) VALUES ('conv_a', {}, NULL, 0, 0)",
            owner.number()
        ),
    )
    .await;
    assert!(
        store
            .find_conversation(&stranger, "conv_a")
            .await
            .unwrap()
            .is_none()
    );
    let conversation = store
        .find_conversation(&owner, "conv_a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(conversation.id(), "conv_a");
    assert!(
        store
            .recent_messages(&conversation, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .conversation_references(&conversation)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .pending_operation(&conversation)
            .await
            .unwrap()
            .is_none()
    );
}
