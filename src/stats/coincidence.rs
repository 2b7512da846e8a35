//! Gaps that began close together on different CPUs ("25 297 of CPU 1's 27 012 gaps began
//! within 5 µs of a gap on another CPU"), counted as the gaps stream in from the measuring
//! threads, over every gap, in memory bounded by how far behind the slowest CPU's gaps
//! come rather than by the run's length.
//!
//! Each CPU's gaps come in start order, each once it has ended. A gap is decided once no
//! gap still to come, on any CPU, can start within the window of it: every CPU has handed
//! over a gap ending after it (no later gap of that CPU can start before that end), or
//! the horizon has passed since it began. Deciding goes in start order across CPUs, a
//! chunk of every CPU's oldest held starts at a time, sorted together, so each gap needs
//! only its neighbours: the starts just decided, and the next start of another CPU.
//!
//! The count equals the one made from whole logs for every gap shorter than the horizon.
//! A gap that comes after its neighbours were decided (it lasted longer than the horizon:
//! a CPU held off for a second) is judged on the starts still held, and counted `late`:
//! the run says so, since the count may then be low.

use std::collections::VecDeque;

/// Held starts a lane gives to one chunk at most (and those equal to the last): a chunk
/// holds at most this many a lane, 24 bytes each (issue 35: 150 KiB over 192 CPUs).
const CHUNK: usize = 32;

/// What the count came to once every gap was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    /// Each lane's gaps that began within the window of a gap on another lane.
    pub per_lane: Vec<u64>,
    /// Gaps that came after their neighbours were decided (longer than the horizon, or
    /// past the held starts' bound behind): judged against part of their neighbours only.
    pub late: u64,
}

/// The streaming count, for `cpus` CPUs (lanes) at once.
#[derive(Debug)]
pub struct Coincidence {
    window: u64,
    horizon: u64,
    lanes: Vec<Lane>,
    /// The chunk being decided, (start, lane) in start order, and for each the next
    /// start of another lane (`u64::MAX`: none held). Kept from chunk to chunk.
    chunk: Vec<(u64, usize)>,
    next_other: Vec<u64>,
    /// Starts decided within the window of the next to decide: (start, lane).
    recent: VecDeque<(u64, usize)>,
    /// How many of `recent` each lane has.
    in_recent: Vec<usize>,
    counts: Vec<u64>,
    /// Gaps that came after their neighbours were decided.
    late: u64,
    /// Where deciding has got to: every start before it is decided.
    decided_to: u64,
    max_held: usize,
}

#[derive(Debug, Default)]
struct Lane {
    held: VecDeque<u64>,
    /// No gap of this lane still to come starts before this.
    known_to: u64,
}

impl Coincidence {
    /// Gaps within `window` of each other (inclusive) coincide; a start is decided at the
    /// latest `horizon` after it (both in the gaps' unit: counter ticks). Each lane holds
    /// at most `held` starts (8 bytes each, at least one): past it, the oldest are decided
    /// with what is known, so a CPU that hands over no gap for a while (or whose reader is
    /// behind) holds every other CPU's back only this far. Unbounded, two readers one a
    /// pass behind the other under overload held 65 536 starts a lane, 96 MiB over 192
    /// CPUs (issue 35).
    pub fn new(cpus: usize, window: u64, horizon: u64, held: usize) -> Coincidence {
        Coincidence {
            window,
            horizon,
            lanes: (0..cpus).map(|_| Lane::default()).collect(),
            chunk: Vec::new(),
            next_other: Vec::new(),
            recent: VecDeque::new(),
            in_recent: vec![0; cpus],
            counts: vec![0; cpus],
            late: 0,
            decided_to: 0,
            max_held: held.max(1),
        }
    }

    /// A gap of lane `lane` from `start` to `end`; each lane's come in start order.
    pub fn add(&mut self, lane: usize, start: u64, end: u64) {
        let Some(l) = self.lanes.get_mut(lane) else {
            return;
        };
        if start < self.decided_to {
            self.late += 1;
        }
        // Full: its oldest eighth is decided first (and every start of other lanes
        // before it); one at a time, each start added would sort a chunk.
        if l.held.len() >= self.max_held {
            let bound = l.held[(self.max_held / 8).min(l.held.len() - 1)];
            self.decide_through(bound.saturating_add(self.window).saturating_add(1));
        }
        let l = &mut self.lanes[lane];
        // Grown by hand, a quarter at a time and never past the bound: a reader hands
        // each CPU up to a queue of gaps a pass, and doubling past it took twice what the
        // readers' memory budget counts for it (issue 35: 6 MB over 192 CPUs a queue
        // behind).
        if l.held.len() == l.held.capacity() {
            let n = l.held.len();
            l.held.reserve_exact((n / 4).max(16).min(self.max_held - n));
        }
        l.held.push_back(start);
        l.known_to = l.known_to.max(end);
    }

    /// Decides every gap no later one can coincide with, `now` on the gaps' clock.
    pub fn advance(&mut self, now: u64) {
        let known = self.lanes.iter().map(|l| l.known_to).min().unwrap_or(0);
        self.decide_through(known.max(now.saturating_sub(self.horizon)));
    }

    /// Decides every gap, and gives each lane's count of coincident gaps, and how many
    /// were judged late.
    pub fn finish(mut self) -> Counted {
        self.decide_through(u64::MAX);
        Counted {
            per_lane: self.counts,
            late: self.late,
        }
    }

    /// Decides the held starts `x` with `x + window < frontier`: no gap to come starts
    /// at or before `x + window`. Chunk by chunk, each lane's oldest sorted together: a
    /// heap of the lanes' oldest starts took one pass down it per start, a sixth of the
    /// replay's reading at 192 CPUs (issue 35).
    fn decide_through(&mut self, frontier: u64) {
        loop {
            let to = self.chunk_frontier(frontier);
            self.take_chunk(to);
            if self.chunk.is_empty() {
                break;
            }
            self.decide_chunk();
            if to >= frontier {
                break;
            }
        }
    }

    /// Where the next chunk ends: `frontier`, or sooner where a lane holds more than
    /// [`CHUNK`] starts before it.
    fn chunk_frontier(&self, frontier: u64) -> u64 {
        let w = self.window;
        (self.lanes.iter())
            .filter_map(|l| l.held.get(CHUNK - 1))
            .map(|&x| x.saturating_add(w).saturating_add(1))
            .fold(frontier, u64::min)
    }

    /// Takes every held start `x` with `x + window < to` into the chunk, in start order
    /// (ties by lane), each with the next start of another lane: later in the chunk, or
    /// else the oldest still held.
    fn take_chunk(&mut self, to: u64) {
        let w = self.window;
        self.chunk.clear();
        for (i, l) in self.lanes.iter_mut().enumerate() {
            let n = l.held.partition_point(|&x| x.saturating_add(w) < to);
            self.chunk.extend(l.held.drain(..n).map(|x| (x, i)));
        }
        self.chunk.sort_unstable();
        // The two oldest starts still held, of two lanes.
        let (mut first, mut second) = ((u64::MAX, usize::MAX), u64::MAX);
        for (i, l) in self.lanes.iter().enumerate() {
            match l.held.front() {
                Some(&x) if x < first.0 => (second, first) = (first.0, (x, i)),
                Some(&x) => second = second.min(x),
                None => {}
            }
        }
        let held_other = |lane: usize| if first.1 != lane { first.0 } else { second };
        self.next_other.clear();
        self.next_other.resize(self.chunk.len(), u64::MAX);
        for i in (0..self.chunk.len()).rev() {
            let lane = self.chunk[i].1;
            self.next_other[i] = match self.chunk.get(i + 1) {
                Some(&(y, l)) if l != lane => y,
                Some(_) => self.next_other[i + 1],
                None => held_other(lane),
            };
        }
    }

    /// Decides the chunk's starts in order.
    fn decide_chunk(&mut self) {
        let window = self.window;
        for (&(x, lane), &next) in self.chunk.iter().zip(&self.next_other) {
            let ahead = next != u64::MAX && next <= x.saturating_add(window);
            while let Some(&(_, l)) =
                (self.recent.front()).filter(|r| r.0.saturating_add(window) < x)
            {
                self.recent.pop_front();
                self.in_recent[l] -= 1;
            }
            // A late start (its neighbours decided before it came) is judged on those
            // of them still recent, and kept out of them: they are in start order.
            if x < self.decided_to {
                let near = |&(r, l): &(u64, usize)| l != lane && r.abs_diff(x) <= window;
                self.counts[lane] += u64::from(ahead || self.recent.iter().any(near));
                continue;
            }
            let behind = self.recent.len() > self.in_recent[lane];
            self.counts[lane] += u64::from(ahead || behind);
            self.recent.push_back((x, lane));
            self.in_recent[lane] += 1;
            self.decided_to = x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For each CPU's gaps (sorted starts), how many begin within `window` ticks of a
    /// gap on another CPU: the count made from whole logs, the streamed one's reference.
    fn coincident(starts_by_cpu: &[Vec<u64>], window: u64) -> Vec<u64> {
        (starts_by_cpu.iter().enumerate())
            .map(|(i, mine)| {
                (mine.iter())
                    .filter(|&&s| {
                        starts_by_cpu.iter().enumerate().any(|(j, other)| {
                            j != i && {
                                let k = other.partition_point(|&o| o + window < s);
                                other.get(k).is_some_and(|&o| o <= s + window)
                            }
                        })
                    })
                    .count() as u64
            })
            .collect()
    }

    #[test]
    fn coincident_gaps_are_counted_per_cpu() {
        let starts = vec![vec![100, 5_000, 9_000], vec![103, 7_000], vec![]];
        assert_eq!(coincident(&starts, 5), vec![1, 1, 0]);
    }

    /// Gap lists recorded on the 16-CPU host: [start_ns, duration_ns] per CPU.
    fn recorded() -> Vec<Vec<(u64, u64)>> {
        let text = include_str!("../../tests/fixtures/host16/gaps-4cpu-400ms.json");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let cpus = v["cpus"].as_object().unwrap();
        let mut keys: Vec<&String> = cpus.keys().collect();
        keys.sort_by_key(|k| k.parse::<u32>().unwrap());
        (keys.into_iter())
            .map(|k| {
                (cpus[k].as_array().unwrap().iter())
                    .map(|g| (g[0].as_u64().unwrap(), g[1].as_u64().unwrap()))
                    .collect()
            })
            .collect()
    }

    /// The gaps handed over as a reader sees them: each lane's once it has ended, every
    /// 20 ms, lanes in `order`; then the count so made.
    fn streamed(lanes: &[Vec<(u64, u64)>], order: &[usize], horizon: u64) -> (Vec<u64>, u64) {
        let mut c = Coincidence::new(lanes.len(), 5_000, horizon, 1 << 16);
        let mut next = vec![0; lanes.len()];
        let end = lanes.iter().flatten().map(|g| g.0 + g.1).max().unwrap_or(0);
        let mut now = 0;
        while now <= end + 20_000_000 {
            now += 20_000_000;
            for &i in order {
                while let Some(&(s, d)) = lanes[i].get(next[i]).filter(|g| g.0 + g.1 <= now) {
                    c.add(i, s, s + d);
                    next[i] += 1;
                }
            }
            c.advance(now);
        }
        let done = c.finish();
        (done.per_lane, done.late)
    }

    /// The whole logs' count of gaps given as (start, duration).
    fn whole(lanes: &[Vec<(u64, u64)>], window: u64) -> Vec<u64> {
        let starts: Vec<Vec<u64>> = lanes
            .iter()
            .map(|l| l.iter().map(|g| g.0).collect())
            .collect();
        coincident(&starts, window)
    }

    /// Issue 29: counted as the gaps stream in, in bounded memory, the count is the one
    /// made from the whole logs, on gaps recorded on the 16-CPU host; whatever order the
    /// readers hand the CPUs over in, and with a CPU that hands over nothing.
    #[test]
    fn issue29_the_streamed_count_is_the_whole_logs_count() {
        let lanes = recorded();
        assert_eq!(lanes.len(), 4);
        let want = whole(&lanes, 5_000);
        let all: usize = lanes.iter().map(Vec::len).sum();
        // Most of that host's gaps coincide, not all: the count tells them apart.
        assert!(
            want.iter().sum::<u64>() as usize > all / 2,
            "{want:?} of {all}"
        );
        assert!(
            (want.iter().sum::<u64>() as usize) < all,
            "{want:?} of {all}"
        );
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]] {
            assert_eq!(streamed(&lanes, &order, 1_000_000_000), (want.clone(), 0));
        }
        let mut with_quiet = lanes.clone();
        with_quiet.push(Vec::new());
        let mut want_quiet = want.clone();
        want_quiet.push(0);
        assert_eq!(
            streamed(&with_quiet, &[4, 0, 1, 2, 3], 1_000_000_000),
            (want_quiet, 0)
        );
    }

    /// A quiet CPU holds the others' starts back only for the horizon, and a gap longer
    /// than the horizon, which comes after its neighbours were decided, is counted late.
    #[test]
    fn a_quiet_cpu_holds_back_only_for_the_horizon() {
        let mut c = Coincidence::new(3, 10, 1_000, 1 << 16);
        for i in 0..100u64 {
            c.add(0, i * 100, i * 100 + 5);
        }
        c.advance(5_000);
        assert!(c.lanes[0].held.len() < 100, "decided past the horizon");
        c.advance(20_000);
        assert!(c.lanes[0].held.is_empty());
        // A 5 000-tick gap on lane 1 from 9 003: its neighbours were decided; late.
        c.add(1, 9_003, 14_003);
        assert_eq!(c.late, 1);
        let counts = c.finish();
        assert_eq!(counts.per_lane[2], 0);
        assert_eq!(counts.late, 1, "finish gives the late count");
    }

    /// Issue 35: a lane holds no more starts than it is allowed, its room included,
    /// however far behind the others are; the oldest are decided first, and a gap that
    /// then comes before them is counted late.
    #[test]
    fn a_lane_holds_at_most_its_bound() {
        let mut c = Coincidence::new(2, 10, u64::MAX, 5_120);
        // Lane 1 hands over nothing: lane 0's starts wait for it.
        for i in 0..20_000u64 {
            c.add(0, i * 100, i * 100 + 5);
            assert!(c.lanes[0].held.len() <= 5_120);
        }
        assert!(
            c.lanes[0].held.capacity() <= 5_120,
            "{}",
            c.lanes[0].held.capacity()
        );
        // Lane 1's gap beside one already decided is judged late; beside one held, not.
        c.add(1, 100 * 100 + 3, 100 * 100 + 8);
        c.add(1, 19_990 * 100 + 3, 19_990 * 100 + 8);
        let counts = c.finish();
        assert_eq!(counts.late, 1);
        assert_eq!(counts.per_lane[1], 1, "only the held neighbour is seen");
    }

    /// Issue 35: decided a chunk at a time, the count is still the whole logs' where
    /// lanes hold many chunks' worth and starts tie across lanes.
    #[test]
    fn chunks_count_as_the_whole_logs_do() {
        // A small generator: the same lanes every run.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        let lanes: Vec<Vec<(u64, u64)>> = (0..9u64)
            .map(|lane| {
                let mut at = 0;
                (0..3_000 + lane * 10)
                    .map(|_| {
                        // Spacings of 0 to 40 ticks against a window of 10: some starts
                        // equal, many within the window, some apart.
                        at += next(41);
                        (at * 1_000, 1 + next(3) * 1_000)
                    })
                    .collect()
            })
            .collect();
        let want = whole(&lanes, 10_000);
        for order in [[0, 1, 2, 3, 4, 5, 6, 7, 8], [8, 7, 6, 5, 4, 3, 2, 1, 0]] {
            let mut c = Coincidence::new(lanes.len(), 10_000, u64::MAX, 1 << 16);
            // Handed over in slices of 500 gaps a lane, then advanced.
            for from in (0..3_100).step_by(500) {
                for &i in &order {
                    for &(s, d) in lanes[i].iter().skip(from).take(500) {
                        c.add(i, s, s + d);
                    }
                }
                c.advance(0);
            }
            assert_eq!(
                c.finish(),
                Counted {
                    per_lane: want.clone(),
                    late: 0
                }
            );
        }
    }

    #[test]
    fn equal_and_edge_starts_coincide_and_one_past_the_window_does_not() {
        let lanes = [
            vec![(100, 1), (1_000, 1), (2_000, 1)],
            vec![(100, 1), (1_010, 1), (2_011, 1)],
            vec![(5_000, 1)],
        ];
        let mut c = Coincidence::new(3, 10, u64::MAX, 1 << 16);
        for (i, l) in lanes.iter().enumerate() {
            for &(s, d) in l {
                c.add(i, s, s + d);
            }
        }
        assert_eq!(c.finish().per_lane, vec![2, 2, 0]);
        assert_eq!(whole(&lanes, 10), vec![2, 2, 0]);
    }
}
