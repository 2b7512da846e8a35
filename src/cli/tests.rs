use super::*;
use clap::CommandFactory;

/// Each time flag of TIME_FLAGS, given a bare 3, means 3 of its unit in every command
/// that lists it (`dma_latency` holds whole µs; durations are `Duration`s).
#[test]
fn time_flags_mean_what_the_table_says() {
    for f in TIME_FLAGS {
        for cmd in f.commands {
            let flag = f.flag.split('/').next_back().unwrap();
            let mut argv = vec!["jitterscope", cmd, flag, "3"];
            argv.extend_from_slice(f.needs);
            let m = Cli::command()
                .try_get_matches_from(&argv)
                .unwrap_or_else(|e| {
                    panic!("{argv:?}: {e}");
                });
            let (_, sub) = m.subcommand().unwrap();
            let want = 3 * f.bare.ns();
            let got = if let Ok(Some(v)) = sub.try_get_one::<u64>(f.id) {
                *v
            } else if let Ok(Some(v)) = sub.try_get_one::<Duration>(f.id) {
                v.as_nanos() as u64
            } else if let Ok(Some(v)) = sub.try_get_one::<i32>(f.id) {
                *v as u64 * 1000
            } else if let Ok(Some(TimerSlack::Ns(v))) = sub.try_get_one::<TimerSlack>(f.id) {
                *v
            } else {
                panic!("{argv:?}: no value of a known type for '{}'", f.id)
            };
            assert_eq!(got, want, "{argv:?}");
        }
    }
}

#[test]
fn the_guide_has_the_time_flag_table() {
    let guide = include_str!("../../docs/guide/README.md");
    assert!(
        guide.contains(&time_flags_markdown()),
        "docs/guide/README.md must hold this table (from cli::TIME_FLAGS):\n{}",
        time_flags_markdown()
    );
}

#[test]
fn cli_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn durations() {
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
    assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
    assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
    for bad in [
        "10x", "", "-1", "0", "0s", "s", "nan", "inf", "40d", "1e20", "1e400",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn thresholds() {
    assert_eq!(parse_threshold("1000").unwrap(), 1000);
    assert_eq!(parse_threshold("500ns").unwrap(), 500);
    assert_eq!(parse_threshold("2us").unwrap(), 2000);
    assert_eq!(parse_threshold("1.5µs").unwrap(), 1500);
    assert_eq!(parse_threshold("1ms").unwrap(), 1_000_000);
    for bad in ["-5", "0", "abc", "5 parsecs", "", "1e3", "0.1"] {
        assert!(parse_threshold(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn microseconds_are_the_bare_unit_of_timer_flags() {
    assert_eq!(parse_us("100").unwrap(), 100_000);
    assert_eq!(parse_us("1.5ms").unwrap(), 1_500_000);
    assert_eq!(parse_us("800ns").unwrap(), 800);
    assert_eq!(parse_interval("200").unwrap(), 200_000);
    assert!(parse_interval("0").is_err());
    assert!(parse_interval("2s").is_err());
    assert_eq!(parse_distance("0").unwrap(), 0);
    assert_eq!(parse_distance("0us").unwrap(), 0);
    assert!(parse_distance("0x").is_err());
    assert!(parse_distance("us").is_err());
    assert_eq!(parse_timer_warmup("0s").unwrap(), Duration::ZERO);
    assert_eq!(parse_timer_warmup("0ms").unwrap(), Duration::ZERO);
    assert_eq!(parse_distance("500").unwrap(), 500_000);
    assert_eq!(parse_timer_warmup("0").unwrap(), Duration::ZERO);
    assert_eq!(parse_timer_warmup("1s").unwrap(), Duration::from_secs(1));
    assert!(parse_dma_latency("-1").is_err());
    assert_eq!(parse_dma_latency("0").unwrap(), 0);
}

#[test]
fn timer_defaults_are_cyclictests() {
    let Some(Command::Timer(a)) = Cli::parse_from(["jitterscope", "timer"]).command else {
        panic!("timer parses");
    };
    assert_eq!((a.interval, a.distance), (1_000_000, 500_000));
    assert_eq!(a.dma_latency, 0);
    assert!(!a.no_dma_latency && !a.relative && !a.aligned);
    assert_eq!(a.run.duration, None);
}

#[test]
fn bare_invocation_has_no_subcommand_and_noise_defaults_are_sane() {
    assert!(Cli::parse_from(["jitterscope"]).command.is_none());
    let a = NoiseArgs::default();
    assert_eq!(a.threshold, 1000);
    assert_eq!(a.run.duration_or_default(), Duration::from_secs(10));
    assert!(!a.run.no_mlock);
}
