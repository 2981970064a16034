//! The board's retention bound at the store: a full board makes room in the post's own
//! transaction, and the database refuses a post that would overfill it.

use uuid::Uuid;
#[allow(unused_imports)]
use wc_domain::{EventRole, MessageId, SessionId};
use wc_store::StoreError;
use wc_store::board::{self, Actor, MAX_RETAINED_MESSAGES};
use wc_store::sessions;
use wc_store::testing::{TestDatabase, note, task_instruction};

async fn new_session(db: &TestDatabase) -> SessionId {
    db.new_session(task_instruction()).await
}

/// Posts a note; `Err` names the violated constraint when the database refused it.
async fn post(db: &TestDatabase, session: &SessionId, body: &str) -> Result<board::Posted, String> {
    board::post(
        db.pool(),
        session,
        note(body),
        Actor::new(Uuid::now_v7(), "post_session_message"),
    )
    .await
    .map_err(|e| match &e {
        StoreError::Database(db) => db
            .as_db_error()
            .and_then(|d| d.constraint())
            .map_or_else(|| e.to_string(), str::to_owned),
        other => other.to_string(),
    })?
    .map_err(|r| format!("{r:?}"))
}

/// (messages on the board, the session's retained count, messages ever posted).
async fn board_state(db: &TestDatabase, session: &SessionId) -> (i64, i32, i64) {
    let client = db.pool().get().await.unwrap();
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM session_messages WHERE session_id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .get(0);
    let row = sessions::get(&client, session).await.unwrap().unwrap();
    (n, row.messages_retained, row.messages_posted)
}

#[tokio::test]
async fn the_schema_bound_is_the_retention_bound() {
    let db = TestDatabase::new().await;
    let client = db.pool().get().await.unwrap();
    let def: String = client
        .query_one(
            // The bound is a rule of the column's type (a domain), so it is checked on every
            // write of the column.
            "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c \
             JOIN pg_attribute a ON a.atttypid = c.contypid \
             WHERE a.attrelid = 'workflow_sessions'::regclass AND a.attname = 'messages_retained' \
               AND c.conname = 'workflow_sessions_messages_retained_bound'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(def, format!("CHECK ((VALUE <= {MAX_RETAINED_MESSAGES}))"));
}

#[tokio::test]
async fn a_full_board_makes_room_in_the_post_and_an_unremovable_board_refuses_it_whole() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let full = i64::from(MAX_RETAINED_MESSAGES);
    for i in 0..full + 3 {
        post(&db, &session, &format!("note {i}")).await.unwrap();
    }
    assert_eq!(
        board_state(&db, &session).await,
        (full, MAX_RETAINED_MESSAGES, full + 3)
    );
    // The three oldest went, the newest stayed.
    let client = db.pool().get().await.unwrap();
    let oldest: i64 = client
        .query_one(
            "SELECT min(number) FROM session_messages WHERE session_id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(oldest, 4);
    // Only the oldest went, so the searches for the next removal start at the oldest kept.
    let row = sessions::get(&client, &session).await.unwrap().unwrap();
    assert_eq!(row.messages_low_number, 4);

    // Counts that claim a full board with nothing on it: room cannot be made, and the post
    // is refused whole (no message, no count, no ledger event).
    client
        .execute(
            "DELETE FROM session_messages WHERE session_id = $1",
            &[&session],
        )
        .await
        .unwrap();
    let before = sessions::get(&client, &session).await.unwrap().unwrap();
    let err = post(&db, &session, "one too many").await.unwrap_err();
    assert_eq!(err, "workflow_sessions_messages_retained_bound");
    let after = sessions::get(&client, &session).await.unwrap().unwrap();
    assert_eq!(after, before);
    assert_eq!(
        board_state(&db, &session).await,
        (0, MAX_RETAINED_MESSAGES, full + 3)
    );
}

#[tokio::test]
async fn the_low_water_number_never_passes_a_message_that_is_kept() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let mut todo = note("the oldest message: a todo");
    todo.kind = wc_domain::MessageKind::Todo;
    let posted = board::post(
        db.pool(),
        &session,
        todo,
        Actor::new(Uuid::now_v7(), "post_session_message"),
    )
    .await
    .unwrap()
    .unwrap();
    for i in 1..MAX_RETAINED_MESSAGES {
        post(&db, &session, &format!("note {i}")).await.unwrap();
    }
    // Completing the todo on a full board removes the oldest other message (number 2); the
    // todo itself (number 1) is kept, so the low-water number stays at it.
    let request = board::CompletionRequest {
        todo_id: posted.message.id.clone(),
        expected_assignment_revision: posted.message.assignment_revision,
        completion_key: "k1".into(),
        fingerprint: "f".repeat(64),
        answer: note("done"),
    };
    let done = board::complete(
        db.pool(),
        &session,
        &request,
        Actor::new(Uuid::now_v7(), "complete_session_message"),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(matches!(done, board::Completed::Applied(_)), "{done:?}");
    let client = db.pool().get().await.unwrap();
    let numbers = |rows: Vec<tokio_postgres::Row>| {
        rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>()
    };
    let first = numbers(
        client
            .query(
                "SELECT number FROM session_messages WHERE session_id = $1 ORDER BY number LIMIT 3",
                &[&session],
            )
            .await
            .unwrap(),
    );
    assert_eq!(first, vec![1, 3, 4]);
    let row = sessions::get(&client, &session).await.unwrap().unwrap();
    assert_eq!(row.messages_low_number, 1);
    // The next post removes the completed todo (closed messages go first), then the oldest
    // notes; the low-water number follows once the oldest of all goes.
    post(&db, &session, "after").await.unwrap();
    post(&db, &session, "after 2").await.unwrap();
    let first = numbers(
        client
            .query(
                "SELECT number FROM session_messages WHERE session_id = $1 ORDER BY number LIMIT 2",
                &[&session],
            )
            .await
            .unwrap(),
    );
    assert_eq!(first, vec![4, 5]);
    let row = sessions::get(&client, &session).await.unwrap().unwrap();
    assert_eq!(row.messages_low_number, 4);
    assert_eq!(
        board_state(&db, &session).await.0,
        i64::from(MAX_RETAINED_MESSAGES)
    );
}

/// The stored row of message `id`.
async fn message(db: &TestDatabase, id: &MessageId) -> Option<board::MessageRow> {
    let client = db.pool().get().await.unwrap();
    let session: Option<SessionId> = client
        .query_opt(
            "SELECT session_id FROM session_messages WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .map(|r| r.get(0));
    let filter = board::ListFilter {
        status: None,
        kind: None,
        reply_to: None,
    };
    board::list(
        db.pool(),
        &session?,
        &filter,
        i64::from(MAX_RETAINED_MESSAGES),
    )
    .await
    .unwrap()
    .0
    .into_iter()
    .find(|m| &m.id == id)
}

#[tokio::test]
async fn a_reply_whose_post_removes_a_reply_of_the_same_todo_counts_both() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let actor = || Actor::new(Uuid::now_v7(), "post_session_message");
    let mut todo = note("a todo");
    todo.kind = wc_domain::MessageKind::Todo;
    let todo = board::post(db.pool(), &session, todo, actor())
        .await
        .unwrap()
        .unwrap()
        .message;
    let reply = |body: &str| {
        let mut m = note(body);
        m.reply_to = Some(todo.id.clone());
        m
    };
    let first = board::post(db.pool(), &session, reply("first reply"), actor())
        .await
        .unwrap()
        .unwrap()
        .message;
    // Closed, and a reply of an open todo: on a full board the removal's second choice.
    let resolved = board::resolve(db.pool(), &session, &first.id, actor())
        .await
        .unwrap()
        .unwrap();
    assert!(resolved.changed);
    for i in 2..MAX_RETAINED_MESSAGES {
        post(&db, &session, &format!("note {i}")).await.unwrap();
    }
    let before = message(&db, &todo.id).await.unwrap();
    assert_eq!((before.reply_count, before.replies_pruned), (1, false));

    // One statement removes the first reply and adds the second: both are changes of the
    // todo's assignment, written in one update of its row.
    board::post(db.pool(), &session, reply("second reply"), actor())
        .await
        .unwrap()
        .unwrap();
    assert!(
        message(&db, &first.id).await.is_none(),
        "the closed reply was kept"
    );
    let after = message(&db, &todo.id).await.unwrap();
    assert_eq!(after.reply_count, 2, "the new reply was not counted");
    assert!(after.replies_pruned, "the removed reply was not recorded");
    assert_eq!(after.assignment_revision, before.assignment_revision + 2);
    assert_eq!(after.version, before.version + 1);
    assert!(!board::completable(&after));
    assert_eq!(
        board_state(&db, &session).await,
        (
            i64::from(MAX_RETAINED_MESSAGES),
            MAX_RETAINED_MESSAGES,
            i64::from(MAX_RETAINED_MESSAGES) + 1
        )
    );
}

#[tokio::test]
async fn a_reply_to_a_message_not_on_the_board_changes_nothing() {
    let db = TestDatabase::new().await;
    let session = new_session(&db).await;
    let other = new_session(&db).await;
    let elsewhere = board::post(
        db.pool(),
        &other,
        note("on another board"),
        Actor::new(Uuid::now_v7(), "post_session_message"),
    )
    .await
    .unwrap()
    .unwrap()
    .message;
    let client = db.pool().get().await.unwrap();
    let before = sessions::get(&client, &session).await.unwrap().unwrap();
    for parent in [
        elsewhere.id.clone(),
        MessageId::parse(&format!("wc_msg_{}", "Z".repeat(22))).unwrap(),
    ] {
        let mut m = note("a reply");
        m.reply_to = Some(parent);
        let refused = board::post(
            db.pool(),
            &session,
            m,
            Actor::new(Uuid::now_v7(), "post_session_message"),
        )
        .await
        .unwrap();
        assert_eq!(
            refused.unwrap_err(),
            board::Refusal::UnknownMessage("reply_to")
        );
    }
    assert_eq!(
        sessions::get(&client, &session).await.unwrap().unwrap(),
        before
    );
    assert_eq!(board_state(&db, &session).await.0, 0);
}
