//! Known cases: fixed scenarios checked whatever the generator draws.

use super::*;

const A: At = At {
    inst: Inst::A,
    surface: Surface::Mcp,
};
const B: At = At {
    inst: Inst::B,
    surface: Surface::Rest,
};

fn post(at: At, kind: Kind, reply_to: Option<u16>, ack_required: bool) -> Op {
    Op::Post {
        at,
        kind,
        reply_to: reply_to.map(Target::Existing),
        ack_required,
        priority: None,
    }
}

fn assignment(at: At, i: u16) -> Op {
    Op::GetAssignment {
        at,
        target: Target::Existing(i),
    }
}

/// Completes the `todo`-th todo that has a fence (in posting order).
fn complete(at: At, todo: u16, fence: FenceChoice, key: u8, answer: u8) -> Op {
    Op::Complete {
        at,
        todo,
        fence,
        key,
        answer,
    }
}

/// Scenarios worth keeping whatever the generator draws, checked only by what clients see.
#[test]
fn known_cases_behave_like_the_model() {
    use FenceChoice::{Latest, Older};
    use Kind::{Note, Todo};
    let cases: Vec<(&str, Vec<Op>)> = vec![
        (
            "a fence survives unrelated posts, resolves, ACKs and changes below direct replies; \
             a completion replays and its key conflicts",
            vec![
                post(A, Todo, None, false),
                post(B, Note, None, true),
                post(A, Note, Some(0), true),
                post(B, Note, Some(2), false),
                assignment(A, 0),
                post(B, Note, None, false),
                Op::Resolve {
                    at: A,
                    target: Target::Existing(1),
                },
                Op::Ack {
                    inst: Inst::B,
                    carrier: Carrier::List,
                    targets: vec![Target::Existing(2), Target::Existing(1), Target::Bogus],
                },
                Op::Resolve {
                    at: B,
                    target: Target::Existing(3),
                },
                complete(B, 0, Latest, 0, 0),
                complete(A, 0, Older(0), 0, 0),
                complete(A, 0, Latest, 0, 1),
                Op::Observe {
                    at: B,
                    limit: 2,
                    drain: true,
                    wait_ms: None,
                    rebaseline: false,
                },
            ],
        ),
        (
            "a resolved direct reply stales a fence; the stale answer's fresh fence applies",
            vec![
                post(A, Todo, None, false),
                post(B, Note, Some(0), false),
                assignment(B, 0),
                Op::Resolve {
                    at: A,
                    target: Target::Existing(1),
                },
                complete(A, 0, Latest, 0, 0),
                complete(B, 0, Latest, 0, 0),
                complete(A, 0, Older(0), 1, 0),
            ],
        ),
        (
            "completing a todo that is a direct reply of an open todo stales the parent's fences",
            vec![
                post(A, Todo, None, false),
                post(A, Todo, Some(0), false),
                assignment(A, 0),
                assignment(A, 1),
                complete(A, 1, Latest, 0, 0),
                complete(B, 0, Latest, 1, 0),
            ],
        ),
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(Env::new());
    let mut failures = Vec::new();
    for (n, (name, ops)) in cases.iter().enumerate() {
        if let Err((e, trace)) = rt.block_on(run_case(&env, n as u64, ops, false)) {
            failures.push(format!("{name}:\n{e}\n\ntrace:\n{trace}"));
        }
    }
    drop(env);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
