//! MAMBA's successive halving (reference §5.2), issue 5 must-show 1: the schedule, the budget
//! split rᵢ = T/(|Sᵢ|·K) and the pruning, on the worked schedules of the reference and on
//! synthetic bandits whose arms have known metric distributions.
//!
//! Checked once by breaking `src/tuning/halving.rs`: keeping ⌈|S|/η⌉ arms instead of ⌊|S|/η⌋
//! fails the worked-schedule and bandit tests; sorting descending fails those and the NaN/ties
//! test; the float round count as default fails `round_counts_are_exact_integers` (243 → 4).

use crate::common;

use sgmcmc::tuning::halving::log_floor;
use sgmcmc::tuning::{HalvingError, HalvingPlan, successive_halving};

/// The worked schedules of reference §5.2 (η = 3): M, R, K, r₀, T, the arms of each round, and
/// how many arms the last round leaves.
#[test]
fn worked_schedules_match_the_reference_table() {
    struct Row {
        arms: usize,
        r: f64,
        k: usize,
        r0: f64,
        t: f64,
        rounds: &'static [(usize, f64)],
        left: usize,
    }
    let table = [
        Row {
            arms: 56,
            r: 1.0,
            k: 3,
            r0: 0.076923,
            t: 12.923,
            rounds: &[(56, 0.07692), (18, 0.23932), (6, 0.71795)],
            left: 2,
        },
        Row {
            arms: 112,
            r: 1.0,
            k: 4,
            r0: 0.025,
            t: 11.2,
            rounds: &[(112, 0.025), (37, 0.07568), (12, 0.23333), (4, 0.7)],
            left: 1,
        },
        Row {
            arms: 42,
            r: 1.0,
            k: 3,
            r0: 0.076923,
            t: 9.6923,
            rounds: &[(42, 0.07692), (14, 0.23077), (4, 0.80769)],
            left: 1,
        },
        Row {
            arms: 84,
            r: 1.0,
            k: 4,
            r0: 0.025,
            t: 8.4,
            rounds: &[(84, 0.025), (28, 0.075), (9, 0.23333), (3, 0.7)],
            left: 1,
        },
        Row {
            arms: 36,
            r: 10.0,
            k: 3,
            r0: 0.76923,
            t: 83.077,
            rounds: &[(36, 0.76923), (12, 2.30769), (4, 6.92308)],
            left: 1,
        },
        Row {
            arms: 72,
            r: 10.0,
            k: 3,
            r0: 0.76923,
            t: 166.15,
            rounds: &[(72, 0.76923), (24, 2.30769), (8, 6.92308)],
            left: 2,
        },
    ];
    // The table is rounded to 4–5 significant digits.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * b.abs();
    for row in table {
        let plan = HalvingPlan::with_arm_budget(row.arms, 3, row.r).unwrap();
        assert_eq!(plan.rounds(), row.k, "M = {}", row.arms);
        assert!(
            close(plan.total_budget(), row.t),
            "M = {}: T = {}",
            row.arms,
            plan.total_budget()
        );
        assert!(
            close(plan.round_budget(row.arms), row.r0),
            "M = {}: r0",
            row.arms
        );
        // Run it with metric = arm index, so the ranking is the grid order.
        let mut seen = Vec::new();
        let outcome = successive_halving(&plan, |_, arms, budget| {
            seen.push((arms.len(), budget));
            arms.iter().map(|&a| a as f64).collect()
        });
        assert_eq!(seen.len(), row.rounds.len(), "M = {}: rounds", row.arms);
        for ((n, b), &(want_n, want_b)) in seen.iter().zip(row.rounds) {
            assert_eq!(*n, want_n, "M = {}", row.arms);
            assert!(close(*b, want_b), "M = {}: {b} vs {want_b}", row.arms);
        }
        let last = outcome.rounds.last().unwrap();
        assert_eq!(
            last.ranking.len() / 3,
            row.left,
            "M = {}: arms left",
            row.arms
        );
        assert_eq!(outcome.winner, 0);
        // Every round spends T/K in all: the budget split is exact.
        let spent: f64 = seen.iter().map(|(n, b)| *n as f64 * b).sum();
        assert!((spent - plan.total_budget()).abs() <= 1e-12 * spent);
    }
}

/// K = ⌊log_η M⌋ in exact integers for the experiments' grid sizes; the reference code's float
/// computation gives 4 for 243 = 3⁵ (compatibility option).
#[test]
fn round_counts_are_exact_integers() {
    for (m, k) in [
        (36, 3),
        (42, 3),
        (56, 3),
        (112, 4),
        (243, 5),
        (242, 4),
        (2, 0),
        (3, 1),
        (9, 2),
    ] {
        assert_eq!(log_floor(m, 3), k, "M = {m}");
        let plan = HalvingPlan::with_arm_budget(m, 3, 1.0).unwrap();
        assert_eq!(plan.rounds(), k);
        assert_eq!(plan.survivors_per_round().len(), k.max(1));
    }
    let float = HalvingPlan::with_arm_budget(243, 3, 1.0)
        .unwrap()
        .with_float_round_count();
    assert_eq!(float.rounds(), 4);
    assert_eq!(log_floor(usize::MAX, 2), 63);
}

/// Synthetic bandits: arm s returns ν_s + σ·Z/√budget (Z standard normal from a fixed stream),
/// i.e. a metric that sharpens with budget, as a Stein discrepancy does. For every round: the arms
/// run are exactly the previous round's kept arms, each gets T/(|S|·K), and the kept arms are the
/// ⌊|S|/η⌋ smallest metrics returned (recomputed here independently). With gaps of 10σ at the
/// smallest budget the best arm must win every replicate (P(error) < 10⁻²⁰ per comparison).
#[test]
fn synthetic_bandits_prune_the_worst_and_find_the_best() {
    for (m, sigma) in [
        (56usize, 0.01),
        (112, 0.01),
        (243, 0.01),
        (56, 3.0),
        (42, 3.0),
    ] {
        for replicate in 0..20u64 {
            // Arm means: a shuffled ladder 0, 1, 2, … so the best arm is not first in grid order.
            let order = common::normals(1000 + replicate, m as u64, m);
            let mut ladder: Vec<usize> = (0..m).collect();
            ladder.sort_by(|&a, &b| order[a].total_cmp(&order[b]));
            let nu: Vec<f64> = ladder.iter().map(|&rank| rank as f64).collect();
            let best = (0..m).min_by(|&a, &b| nu[a].total_cmp(&nu[b])).unwrap();
            let plan = HalvingPlan::with_arm_budget(m, 3, 1.0).unwrap();
            let mut previous_kept: Option<Vec<usize>> = None;
            let mut calls = 0u64;
            let outcome = successive_halving(&plan, |round, arms, budget| {
                if let Some(kept) = &previous_kept {
                    assert_eq!(arms, kept.as_slice(), "round {round} runs the kept arms");
                } else {
                    assert_eq!(arms, (0..m).collect::<Vec<_>>().as_slice());
                }
                let want = plan.total_budget() / (arms.len() * plan.rounds()) as f64;
                assert!((budget - want).abs() <= 1e-15 * want);
                calls += 1;
                let z = common::normals(7 + replicate, calls, arms.len());
                let metrics: Vec<f64> = arms
                    .iter()
                    .zip(z)
                    .map(|(&a, z)| nu[a] + sigma * z / budget.sqrt())
                    .collect();
                // The kept arms, recomputed: indices of the ⌊|S|/3⌋ smallest metrics.
                let mut idx: Vec<usize> = (0..arms.len()).collect();
                idx.sort_by(|&i, &j| {
                    metrics[i]
                        .partial_cmp(&metrics[j])
                        .unwrap()
                        .then(arms[i].cmp(&arms[j]))
                });
                previous_kept = Some(idx[..arms.len() / 3].iter().map(|&i| arms[i]).collect());
                metrics
            });
            for (record, kept) in outcome
                .rounds
                .iter()
                .zip(outcome.rounds.iter().map(|r| &r.kept))
            {
                let sorted = record.ranking.windows(2).all(|w| w[0].1 <= w[1].1);
                assert!(sorted, "ranking is ascending");
                assert_eq!(kept.len(), record.ranking.len() / 3);
            }
            if sigma < 0.1 {
                assert_eq!(outcome.winner, best, "M = {m}, replicate {replicate}");
            }
        }
    }
}

/// NaN metrics rank last (as +∞), ties keep grid order, and M < η runs one round with the whole
/// budget; bad plans are errors.
#[test]
fn nan_ties_degenerate_grids_and_errors() {
    let plan = HalvingPlan::with_arm_budget(9, 3, 1.0).unwrap();
    let outcome = successive_halving(&plan, |round, arms, _| {
        arms.iter()
            .map(|&a| match (round, a) {
                (0, 0) => f64::NAN,
                (0, 4) | (0, 2) => 1.0, // a tie: 2 before 4
                (0, _) => 2.0 + a as f64,
                (_, a) => 10.0 - a as f64,
            })
            .collect()
    });
    let first = &outcome.rounds[0];
    assert_eq!(first.kept, vec![2, 4, 1]);
    assert_eq!(first.ranking.last().unwrap(), &(0, f64::INFINITY));
    assert_eq!(outcome.rounds[1].kept, vec![4]);
    assert_eq!(outcome.winner, 4);

    let tiny = HalvingPlan::with_arm_budget(2, 3, 5.0).unwrap();
    assert_eq!((tiny.rounds(), tiny.rounds_run()), (0, 1));
    let mut budgets = Vec::new();
    let outcome = successive_halving(&tiny, |_, arms, b| {
        budgets.push(b);
        arms.iter().map(|&a| 1.0 - a as f64).collect()
    });
    assert_eq!((budgets, outcome.winner), (vec![5.0], 1));

    assert_eq!(
        HalvingPlan::with_arm_budget(0, 3, 1.0),
        Err(HalvingError::NoArms)
    );
    assert_eq!(
        HalvingPlan::with_arm_budget(5, 1, 1.0),
        Err(HalvingError::BadEta(1))
    );
    assert!(matches!(
        HalvingPlan::with_total_budget(5, 3, f64::NAN),
        Err(HalvingError::BadBudget(_))
    ));
    assert!(matches!(
        HalvingPlan::with_total_budget(5, 3, 0.0),
        Err(HalvingError::BadBudget(_))
    ));
}
