//! Pipelines over several slots on a cluster: a pipeline that reads or
//! changes more than one queue (a worker consuming in one queue and
//! claiming in the next, a lookup over every queue) is sent as one
//! pipeline per slot, and the replies put back in the pipeline's order.
//! Each queue's commands stay together and in order; commands in different
//! slots are on different masters, so no order between them is lost.

use redis::aio::ConnectionLike;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisResult, Value};

/// The slot of `cmd`'s first key (the third argument of a script call);
/// `None` for a command without keys (TIME, PING, a script without keys).
fn slot_of(cmd: &Cmd) -> Option<Slot> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()?.to_ascii_uppercase();
    let key = match name.as_slice() {
        b"EVALSHA" | b"EVAL" | b"FCALL" => {
            let _script = args.next()?;
            let keys: usize = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
            (keys > 0).then(|| args.next())??
        }
        _ => args.next()?,
    };
    Some(Slot::for_key(key))
}

/// For a plain pipeline whose keys span several slots: the indexes of its
/// commands grouped by slot, in order of first appearance (keyless commands
/// go with the group before them). `None` when one pipeline will do.
pub(super) fn by_slot(pipeline: &Pipeline) -> Option<Vec<Vec<usize>>> {
    if pipeline.is_transaction() {
        return None;
    }
    let mut groups: Vec<(Option<Slot>, Vec<usize>)> = Vec::new();
    for (i, cmd) in pipeline.cmd_iter().enumerate() {
        let slot = slot_of(cmd);
        let at = match slot {
            Some(_) => groups.iter().position(|(s, _)| *s == slot),
            None => groups.len().checked_sub(1),
        };
        match at {
            Some(k) => groups[k].1.push(i),
            None => groups.push((slot, vec![i])),
        }
    }
    (groups.iter().filter(|(s, _)| s.is_some()).count() > 1)
        .then(|| groups.into_iter().map(|(_, g)| g).collect())
}

/// Sends `pipeline` as one pipeline per group of [`by_slot`] and returns
/// the replies in the pipeline's order.
pub(super) async fn send_split(
    con: &mut impl ConnectionLike,
    pipeline: &Pipeline,
    groups: Vec<Vec<usize>>,
) -> RedisResult<Vec<Value>> {
    let cmds: Vec<&Cmd> = pipeline.cmd_iter().collect();
    let mut values = vec![Value::Nil; cmds.len()];
    for group in groups {
        let mut part = redis::pipe();
        for &i in &group {
            part.add_command(cmds[i].clone());
        }
        let replies = con.req_packed_commands(&part, 0, group.len()).await?;
        for (i, v) in group.into_iter().zip(replies) {
            values[i] = v;
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slot_is_one_pipeline() {
        let mut p = redis::pipe();
        p.hset("jw:{a}:x", "f", 1).zcard("jw:{a}:y").cmd("TIME");
        assert_eq!(by_slot(&p), None);
    }

    #[test]
    fn queues_split_in_order_with_script_keys() {
        let mut p = redis::pipe();
        p.cmd("EVALSHA")
            .arg("abc")
            .arg(2)
            .arg("jw:{a}:l")
            .arg("jw:{a}:r")
            .arg("x");
        p.cmd("EVALSHA").arg("abc").arg(1).arg("jw:{b}:l");
        p.cmd("TIME");
        p.exists("jw:{a}:job");
        assert_eq!(by_slot(&p), Some(vec![vec![0, 3], vec![1, 2]]));
    }

    #[test]
    fn a_transaction_is_never_split() {
        let mut p = redis::pipe();
        p.atomic().exists("jw:{a}:x").exists("jw:{b}:x");
        assert_eq!(by_slot(&p), None);
    }
}
