//! The generators of operation sequences, and how a sequence is shown when it fails.

use super::*;

fn inst() -> impl Strategy<Value = Inst> {
    prop_oneof![Just(Inst::A), Just(Inst::B)]
}

fn at() -> impl Strategy<Value = At> {
    (
        inst(),
        prop_oneof![3 => Just(Surface::Mcp), 1 => Just(Surface::Rest)],
    )
        .prop_map(|(inst, surface)| At { inst, surface })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        12 => any::<u16>().prop_map(Target::Existing),
        3 => any::<u16>().prop_map(Target::Any),
        1 => Just(Target::Bogus),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        2 => Just(Kind::Note),
        1 => Just(Kind::Question),
        4 => Just(Kind::Todo),
        2 => Just(Kind::Answer),
    ]
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Open),
        Just(Status::Resolved),
        Just(Status::Completed)
    ]
}

/// The operations that change the board or read an assignment: the ones that may race.
fn changing_op() -> impl Strategy<Value = Op> {
    let post = (
        at(),
        kind(),
        prop_oneof![1 => Just(None), 3 => target().prop_map(Some)],
        prop::bool::weighted(0.4),
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(Priority::Low)),
            1 => Just(Some(Priority::Normal)),
            1 => Just(Some(Priority::High)),
        ],
    )
        .prop_map(|(at, kind, reply_to, ack_required, priority)| Op::Post {
            at,
            kind,
            reply_to,
            ack_required,
            priority,
        });
    let resolve = (at(), target()).prop_map(|(at, target)| Op::Resolve { at, target });
    let assignment = (at(), target()).prop_map(|(at, target)| Op::GetAssignment { at, target });
    let fence = prop_oneof![
        3 => Just(FenceChoice::Latest),
        3 => any::<u8>().prop_map(FenceChoice::Older),
        1 => any::<u16>().prop_map(FenceChoice::Foreign),
    ];
    let complete =
        (at(), any::<u16>(), fence, 0u8..4, 0u8..3).prop_map(|(at, todo, fence, key, answer)| {
            Op::Complete {
                at,
                todo,
                fence,
                key,
                answer,
            }
        });
    let ack = (
        inst(),
        prop_oneof![Just(Carrier::List), Just(Carrier::RuntimeStatus)],
        prop::collection::vec(target(), 1..=4),
    )
        .prop_map(|(inst, carrier, targets)| Op::Ack {
            inst,
            carrier,
            targets,
        });
    prop_oneof![
        5 => post,
        1 => resolve,
        3 => assignment,
        4 => complete,
        2 => ack,
    ]
}

/// `op` sent to instance `inst`.
fn on(inst: Inst, op: Op) -> Op {
    match op {
        Op::Post {
            at,
            kind,
            reply_to,
            ack_required,
            priority,
        } => Op::Post {
            at: At { inst, ..at },
            kind,
            reply_to,
            ack_required,
            priority,
        },
        Op::Resolve { at, target } => Op::Resolve {
            at: At { inst, ..at },
            target,
        },
        Op::GetAssignment { at, target } => Op::GetAssignment {
            at: At { inst, ..at },
            target,
        },
        Op::Complete {
            at,
            todo,
            fence,
            key,
            answer,
        } => Op::Complete {
            at: At { inst, ..at },
            todo,
            fence,
            key,
            answer,
        },
        Op::Ack {
            carrier, targets, ..
        } => Op::Ack {
            inst,
            carrier,
            targets,
        },
        other => other,
    }
}

fn op() -> impl Strategy<Value = Op> {
    let observe = (
        at(),
        1u32..=4,
        any::<bool>(),
        prop_oneof![4 => Just(None), 1 => Just(Some(0u32)), 1 => Just(Some(30u32))],
        prop::bool::weighted(0.1),
    )
        .prop_map(|(at, limit, drain, wait_ms, rebaseline)| Op::Observe {
            at,
            limit,
            drain,
            wait_ms,
            rebaseline,
        });
    let filter = prop_oneof![
        3 => Just(Filter::All),
        1 => status().prop_map(Filter::Status),
        1 => kind().prop_map(Filter::Kind),
        1 => target().prop_map(Filter::ReplyTo),
    ];
    let list = (
        at(),
        filter,
        prop_oneof![2 => Just(None), 1 => (1u32..=6).prop_map(Some)],
    )
        .prop_map(|(at, filter, limit)| Op::List { at, filter, limit });
    let race = (changing_op(), changing_op())
        .prop_map(|(x, y)| Op::Race(Box::new(on(Inst::A, x)), Box::new(on(Inst::B, y))));
    prop_oneof![
        1 => Just(Op::Skip),
        30 => changing_op(),
        6 => observe,
        2 => list,
        5 => race,
    ]
}

pub(super) fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 8..=30)
}

pub(super) fn show(ops: &[Op]) -> String {
    let mut out = String::new();
    for (n, op) in ops.iter().enumerate() {
        if !matches!(op, Op::Skip) {
            let _ = writeln!(out, "  {n:>2}: {op:?}");
        }
    }
    out
}
