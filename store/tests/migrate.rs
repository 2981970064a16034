//! Migrations against a real Postgres.

use wc_store::migrate;
use wc_store::testing::TestDatabase;

#[tokio::test]
async fn migrating_twice_applies_nothing_the_second_time() {
    let db = TestDatabase::empty().await;
    let first = migrate::migrate(&db.config()).await.unwrap();
    assert_eq!(first.level, migrate::expected_level());
    assert!(!first.applied.is_empty());
    let second = migrate::migrate(&db.config()).await.unwrap();
    assert!(second.applied.is_empty(), "{second:?}");
    assert_eq!(second.level, first.level);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_migrators_both_succeed_and_apply_each_migration_once() {
    let db = TestDatabase::empty().await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let config = db.config();
            tokio::spawn(async move { migrate::migrate(&config).await })
        })
        .collect();
    let mut applied = Vec::new();
    for r in runs {
        applied.extend(r.await.unwrap().expect("every migrator succeeds").applied);
    }
    let expected = (1..=migrate::expected_level()).count();
    assert_eq!(
        applied.len(),
        expected,
        "each migration applied by exactly one run: {applied:?}"
    );
    let client = db.pool().get().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM refinery_schema_history", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows as usize, expected);
}

#[tokio::test]
async fn template_databases_arrive_migrated() {
    let db = TestDatabase::new().await;
    let client = db.pool().get().await.unwrap();
    assert_eq!(
        migrate::current_level(&client).await.unwrap(),
        Some(migrate::expected_level())
    );
}
