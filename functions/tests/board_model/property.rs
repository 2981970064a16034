//! The property: random operation sequences on two instances behave like the model.

use super::*;

#[test]
fn the_message_board_behaves_like_its_model_on_two_instances() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(Env::new());
    // `Config::default()` honours the PROPTEST_* variables; without them: 32 cases, and a
    // bounded shrink of a failure.
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 32;
    }
    if std::env::var_os("PROPTEST_MAX_SHRINK_ITERS").is_none() {
        config.max_shrink_iters = 1024;
    }
    if std::env::var_os("PROPTEST_MAX_SHRINK_TIME").is_none() {
        config.max_shrink_time = 30_000;
    }
    config.failure_persistence = None;
    let mut runner = PropRunner::new(config);
    let counter = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&ops(), |ops| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(run_case(&env, n, &ops, true))
            .map_err(|(e, trace)| {
                TestCaseError::fail(format!("{e}\n\nops:\n{}\ntrace:\n{trace}", show(&ops)))
            })
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, ops)) => panic!(
            "the board disagreed with its model; minimal case found ({} operations):\n{reason}",
            ops.iter().filter(|op| !matches!(op, Op::Skip)).count()
        ),
        Err(TestError::Abort(reason)) => panic!("proptest aborted: {reason}"),
    }
    drop(env);
}
