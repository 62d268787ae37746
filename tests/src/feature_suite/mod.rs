//! The feature suite both backends run: the operator features of the
//! capability traits (`Admin`, `Events`, `Maintenance`), each test generic over a
//! [`FeatureHarness`], instantiated by `tests/tests/features_redis.rs` and
//! `tests/tests/features_zookeeper.rs` with [`feature_tests!`].
//!
//! It grows one capability at a time as ZooKeeper gains them, one file per
//! capability (`cancel`, `pause`, `limit`, `failed`, `history`, `config`,
//! `tags`, `unique`, `priority`, `recurring`, `leader` for maintenance,
//! `stats`, `events`, `deps`, `recovery`); the Redis feature tests
//! (`tests/tests/redis_*.rs`) keep what only Redis has.

mod cancel;
mod config;
mod deps;
mod events;
mod failed;
mod history;
mod leader;
mod limit;
mod pause;
mod priority;
mod recovery;
mod recurring;
mod stats;
mod tags;
mod unique;

pub use cancel::*;
pub use config::*;
pub use deps::*;
pub use events::*;
pub use failed::*;
pub use history::*;
pub use leader::*;
pub use limit::*;
pub use pause::*;
pub use priority::*;
pub use recovery::*;
pub use recurring::*;
pub use stats::*;
pub use tags::*;
pub use unique::*;

use std::future::Future;
use std::time::Duration;

use jobworker::board::{Admin, Events, Inspect, Maintenance, Recovery};
use jobworker::{Board, JobState, ListFilter, Page};

/// An expiry no test outlives.
pub const LONG: Duration = Duration::from_secs(120);

/// How long a test waits for something that should happen at once: generous
/// for a busy machine.
pub const SOON: Duration = Duration::from_secs(20);

/// Boards of one backend for the feature suite.
pub trait FeatureHarness: Sync {
    /// The backend's board.
    type B: Board + Admin + Events + Inspect + Maintenance + Recovery + Clone + Send + Sync + 'static;
    /// A board with its own connection.
    fn board(&self) -> impl Future<Output = Self::B> + Send;
}

/// Instantiates every test of the feature suite as a `#[tokio::test]` for a
/// harness expression.
#[macro_export]
macro_rules! feature_tests {
    ($harness:expr) => {
        $crate::feature_tests!(@each $harness;
            cancel_takes_waiting_work_off_the_board, cancel_is_all_or_nothing,
            cancel_of_a_held_job_tells_its_owner_and_revokes_the_lease,
            a_cancel_racing_claims_leaves_each_job_one_ending,
            a_cancel_of_several_jobs_racing_a_consume_is_all_or_nothing,
            a_paused_queue_hands_out_nothing_until_resumed,
            a_paused_queue_still_takes_back_expired_leases,
            wait_on_a_paused_queue_sleeps_until_resumed,
            a_concurrency_limit_caps_leases_across_claimers,
            claimers_racing_under_a_limit_hold_exactly_the_limit,
            wait_at_the_limit_sleeps_until_a_lease_is_freed,
            trashed_jobs_go_to_failure_groups_by_reason_kind,
            retry_one_job_resets_its_attempts, retry_a_whole_group_or_every_group,
            purge_deletes_trashed_jobs_for_good, a_retried_job_keeps_its_id_name_and_args,
            history_shows_a_jobs_life_in_order, history_shows_the_trash_a_retry_and_a_cancel,
            history_shows_a_stalled_lease,
            config_values_are_checked_stored_and_removed,
            queues_are_listed_and_their_jobs_counted,
            tags_are_added_removed_found_and_counted, a_finished_job_is_still_found_by_its_tags,
            tracked_jobs_are_listed_until_untracked,
            a_unique_key_returns_the_existing_job_until_its_ttl_passes,
            posts_racing_for_a_unique_key_post_one_job,
            changing_a_ready_jobs_priority_moves_it_at_once,
            a_claimed_jobs_new_priority_applies_once_it_is_ready_again,
            priority_changes_are_refused_for_finished_missing_or_out_of_range,
            templates_are_created_updated_listed_and_deleted,
            cron_templates_find_their_next_slot_in_their_time_zone,
            a_due_slot_is_spawned_once_with_the_templates_fields,
            backlog_caps_how_many_missed_runs_are_caught_up,
            racing_spawners_post_exactly_one_run_per_slot,
            a_large_catch_up_posts_every_run_of_its_backlog,
            elect_takes_renews_and_resigns_a_queues_leadership,
            one_runner_leads_and_another_takes_over_when_it_goes,
            stats_count_wait_and_run_times_failures_and_retries,
            throughput_counts_completed_and_trashed_jobs_per_minute,
            stats_stay_exact_while_boards_work_and_fold,
            one_claim_counts_each_wait_in_its_bucket,
            the_event_stream_carries_every_event,
            the_event_stream_tells_failures_the_trash_and_cancels,
            the_tracked_stream_carries_only_tracked_jobs,
            a_same_queue_chain_runs_in_order, a_cross_queue_dependency_is_released_when_consumed,
            a_job_waits_for_all_of_its_dependencies,
            a_dependency_already_consumed_leaves_the_job_ready_at_once,
            a_missing_dependency_fails_the_post_and_leaves_nothing_behind,
            cancel_is_refused_with_dependents_and_cancels_the_chain_with_them,
            diamond_across_two_queues_runs_in_dependency_order,
            waiting_jobs_are_listed_counted_reprioritised_and_cancelled,
            dependents_posted_during_their_dependencys_consume_are_all_released,
            a_cancel_racing_a_dependents_post_never_strands_it,
            cancel_with_dependents_takes_a_fan_in_graph,
            a_lone_job_that_kills_its_worker_three_times_is_a_poison_pill,
            jobs_of_a_worker_that_held_several_become_suspects_run_alone,
            a_poison_pill_among_several_is_found, recovery_ignores_other_owners);
    };
    (@each $harness:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let harness = $harness;
                $crate::feature_suite::$name(&harness).await;
            }
        )*
    };
}

/// The ids `list` gives for `state` in `q` (the first 10), sorted.
async fn listed_ids<B: Board>(b: &B, q: &str, state: JobState) -> Vec<String> {
    let page = Page { offset: 0, limit: 10 };
    let listed = b.list(q, ListFilter::State(state), page).await.unwrap();
    let mut ids: Vec<String> = listed.into_iter().map(|j| j.id.to_string()).collect();
    ids.sort();
    ids
}
