//! Samples that cannot rot (issues 15 and 31). Every sample output in the README and the
//! guide (docs/guide/) comes from a run that `scripts/readme-samples` can redo: each sits
//! under a `<!-- sample: ARGS -->` marker, starts with the command and the host it ran
//! on, and no other code block holds output. And every command line the docs show, a
//! sample's and each `jitterscope …` in a code block (or an inline span, where it names
//! no placeholder), parses with today's flags: clap's own definitions
//! (`Cli::try_parse_from`) judge it, so a renamed or removed flag fails here, naming the
//! file and line.

use std::path::{Path, PathBuf};

use clap::Parser;
use clap::error::ErrorKind;
use jitterscope::cli::Cli;

const MARK: &str = "<!-- sample: ";

/// The README and every page of the guide, as (path from the repository, text).
fn docs() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![PathBuf::from("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guide"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    guide.retain(|p| p.extension().is_some_and(|e| e == "md"));
    guide.sort();
    paths.extend(
        guide
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_path_buf()),
    );
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).unwrap();
            (p.display().to_string(), text)
        })
        .collect()
}

/// A sample marker's ARGS (its filters after `|` left out).
fn marker_args(line: &str) -> Option<&str> {
    let spec = line.strip_prefix(MARK)?.strip_suffix(" -->")?;
    Some(spec.split('|').next().unwrap().trim())
}

/// A code block: where it opens (0-based line), its language and its lines, and the
/// sample marker above it, if any.
struct Block<'a> {
    open: usize,
    lang: &'a str,
    lines: Vec<&'a str>,
    sample: Option<&'a str>,
}

fn blocks(text: &str) -> Vec<Block<'_>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Block> = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in lines.iter().enumerate() {
        if !line.starts_with("```") {
            if let Some(b) = open.as_mut() {
                b.lines.push(line);
            }
            continue;
        }
        match open.take() {
            Some(b) => out.push(b),
            None => {
                let sample = i.checked_sub(1).and_then(|p| marker_args(lines[p]));
                open = Some(Block {
                    open: i,
                    lang: line.trim_start_matches('`').trim(),
                    lines: Vec::new(),
                    sample,
                })
            }
        }
    }
    assert!(open.is_none(), "a code block is never closed");
    out
}

#[test]
fn every_sample_can_be_regenerated() {
    let mut samples = 0;
    for (file, text) in docs() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with(MARK) {
                assert!(
                    lines.get(i + 1).is_some_and(|l| *l == "```"),
                    "{file}:{}: a sample marker must sit right above a code block",
                    i + 1
                );
            }
        }
        for b in blocks(&text) {
            match b.sample {
                Some(args) => {
                    samples += 1;
                    let first = b.lines.first().copied().unwrap_or("");
                    assert!(
                        first.starts_with(&format!("$ jitterscope {args}    # ")),
                        "{file}:{}: the sample must start with its command and host \
                         (run scripts/readme-samples): {first}",
                        b.open + 2
                    );
                }
                // Output (a clock line, a warning) outside a marked block cannot be redone.
                None => {
                    for (k, line) in b.lines.iter().enumerate() {
                        assert!(
                            !line.starts_with("clock: ")
                                && !line.starts_with("jitterscope: warning"),
                            "{file}:{}: output outside a sample marker: {line}",
                            b.open + k + 2
                        );
                    }
                }
            }
        }
    }
    assert!(samples >= 10, "{samples} samples");
}

/// Splits a shell line into simple commands, each a list of words: quotes kept together
/// and removed, `;`, `|`, `&`, `(` and `)` end a command (so `$(jitterscope …)` and
/// `<(jitterscope …)` are commands of their own), a redirection ends its words, and `#`
/// after a space starts a comment. Hand-written: shlex splits words but knows none of
/// these operators, and both must be read in the one pass that knows the quotes.
fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    let mut redirected = false;
    let mut prev = ' ';
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.get_or_insert_default().push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    word.get_or_insert_default();
                }
                '#' if prev.is_whitespace() && word.is_none() => break,
                ' ' | '\t' => {
                    if let Some(w) = word.take().filter(|_| !redirected) {
                        commands.last_mut().unwrap().push(w);
                    }
                }
                ';' | '|' | '&' | '(' | ')' => {
                    if let Some(w) = word.take().filter(|_| !redirected) {
                        commands.last_mut().unwrap().push(w);
                    }
                    redirected = false;
                    commands.push(Vec::new());
                }
                '<' | '>' => {
                    // `2>` : the 2 is the redirection's, not a word.
                    if word
                        .as_deref()
                        .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()))
                    {
                        word = None;
                    }
                    if let Some(w) = word.take().filter(|_| !redirected) {
                        commands.last_mut().unwrap().push(w);
                    }
                    redirected = true;
                }
                _ => word.get_or_insert_default().push(c),
            },
        }
        prev = c;
    }
    if let Some(w) = word.filter(|_| !redirected) {
        commands.last_mut().unwrap().push(w);
    }
    commands.retain(|c| !c.is_empty());
    commands
}

/// The words after `jitterscope` in a simple command (which may start with sudo, flock
/// FILE, timeout N or VAR=value), if it runs jitterscope. A word the shell would expand
/// (`"$PID"`, `$(pidof -s app)`) stands for a value the reader supplies: it is given as 1.
fn jitterscope_args(words: &[String]) -> Option<Vec<String>> {
    let mut rest = words;
    loop {
        let first = rest.first()?;
        if first == "jitterscope" || first.ends_with("/jitterscope") {
            let expand = |w: &String| match w.contains('$') {
                true => "1".to_string(),
                false => w.clone(),
            };
            return Some(rest[1..].iter().map(expand).collect());
        }
        rest = match first.as_str() {
            "sudo" | "exec" | "$" | "if" | "then" | "else" | "do" | "while" | "until" | "!"
            | "time" => &rest[1..],
            "flock" | "timeout" => rest.get(2..)?,
            w if w.contains('=') && !w.starts_with('-') => &rest[1..],
            _ => return None,
        };
    }
}

/// Whether an inline span is a synopsis rather than a command line: it names a
/// placeholder (`FILE`, `A.json`, `[…]`, `…`) that no real run would. A flag's own
/// letters (`-D`, `--cpus=CPUS`'s `--cpus`) are no placeholder.
fn is_synopsis(span: &str) -> bool {
    let placeholder = |w: &str| {
        w.len() <= 12
            && w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && w.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    span.contains(['[', '…', '{'])
        || span.contains("...")
        || span
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-')
            .filter(|w| !w.starts_with('-'))
            .any(|w| w.split('-').any(placeholder))
}

/// A command line the docs show.
struct Shown {
    file: String,
    /// 1-based.
    line: usize,
    args: Vec<String>,
    /// In a sentence (`jitterscope compare` the two files), not a code block: a mention
    /// may leave the command's required arguments to the reader.
    inline: bool,
}

/// Every jitterscope command line the docs show.
fn command_lines() -> Vec<Shown> {
    let mut found = Vec::new();
    for (file, text) in docs() {
        for b in blocks(&text) {
            if let Some(args) = b.sample {
                let words = simple_commands(args).concat();
                found.push(Shown {
                    file: file.clone(),
                    line: b.open,
                    args: words,
                    inline: false,
                });
                continue;
            }
            if !matches!(b.lang, "" | "sh" | "bash" | "console" | "shell") {
                continue;
            }
            // A block with prompts holds output too: only its prompted lines are commands.
            let prompted = b.lines.iter().any(|l| l.starts_with("$ "));
            for (k, line) in b.lines.iter().enumerate() {
                let line = match (prompted, line.strip_prefix("$ ")) {
                    (true, None) => continue,
                    (_, Some(l)) => l,
                    (false, None) => line,
                };
                for words in simple_commands(line) {
                    if let Some(args) = jitterscope_args(&words) {
                        found.push(Shown {
                            file: file.clone(),
                            line: b.open + k + 2,
                            args,
                            inline: false,
                        });
                    }
                }
            }
        }
        // Inline spans outside code blocks: `jitterscope …`.
        let mut in_block = false;
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if in_block {
                continue;
            }
            for span in line.split('`').skip(1).step_by(2) {
                let Some(rest) = span.strip_prefix("jitterscope ") else {
                    continue;
                };
                if is_synopsis(span) {
                    continue;
                }
                for words in simple_commands(&format!("jitterscope {rest}")) {
                    if let Some(args) = jitterscope_args(&words) {
                        found.push(Shown {
                            file: file.clone(),
                            line: i + 1,
                            args,
                            inline: true,
                        });
                    }
                }
            }
        }
    }
    found
}

/// Why `jitterscope ARGS` does not parse with today's flags, if it does not; a mention
/// (`inline`) may lack the required arguments.
fn refusal(args: &[String], inline: bool) -> Option<String> {
    let argv = std::iter::once("jitterscope".to_string()).chain(args.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(_) => None,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => None,
        Err(e) if inline && e.kind() == ErrorKind::MissingRequiredArgument => None,
        Err(e) => Some(one_line(&e.render().to_string())),
    }
}

/// clap's message on one line (some name the argument on the next), with its tip.
fn one_line(text: &str) -> String {
    let para: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let tip = text.lines().map(str::trim).find(|l| l.starts_with("tip: "));
    para.into_iter().chain(tip).collect::<Vec<_>>().join(" ")
}

#[test]
fn issue31_every_command_line_in_the_docs_parses_with_todays_flags() {
    let lines = command_lines();
    let failures: Vec<String> = lines
        .iter()
        .filter_map(|s| {
            let why = refusal(&s.args, s.inline)?;
            Some(format!(
                "{}:{}: jitterscope {}: {why}",
                s.file,
                s.line,
                s.args.join(" ")
            ))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} command lines in the docs no longer parse:\n{}",
        failures.len(),
        lines.len(),
        failures.join("\n")
    );
    eprintln!("{} command lines in the docs parse", lines.len());
    // The extraction finds them: the samples and the docs' own command lines.
    assert!(
        lines.len() >= 40,
        "only {} command lines found",
        lines.len()
    );
}

#[test]
fn issue31_the_command_splitter_finds_jitterscope_where_a_shell_would() {
    let args = |line: &str| -> Vec<Vec<String>> {
        simple_commands(line)
            .iter()
            .filter_map(|w| jitterscope_args(w))
            .collect()
    };
    assert_eq!(
        args("sudo jitterscope noise -a 1 --trace   # and why"),
        [["noise", "-a", "1", "--trace"]]
    );
    assert_eq!(
        args("source <(jitterscope completions bash)"),
        [["completions", "bash"]]
    );
    assert_eq!(
        args("jitterscope man > jitterscope.1; man -l jitterscope.1"),
        [["man"]]
    );
    assert_eq!(
        args("flock /tmp/x.lock target/release/jitterscope noise -D '5 s' 2>err && echo ok"),
        [["noise", "-D", "5 s"]]
    );
    assert!(args("jitterscope: warning: running in a virtual machine").is_empty());
    assert_eq!(
        args("if sudo jitterscope noise -a 1; then echo ok; fi"),
        [["noise", "-a", "1"]]
    );
    assert_eq!(
        args(r#"sudo jitterscope watch --pid "$(pidof -s app)" -D 60s"#),
        [["watch", "--pid", "1", "-D", "60s"]]
    );
    let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    assert!(refusal(&words("noise --treshold 5"), false).is_some());
    assert!(refusal(&words("noise -T 5"), false).is_none());
    assert!(refusal(&words("compare"), false).is_some());
    assert!(refusal(&words("compare"), true).is_none(), "a mention");
    assert!(refusal(&words("compare --nosuch"), true).is_some());
    assert!(is_synopsis("jitterscope report A.json --format F"));
    assert!(!is_synopsis("jitterscope tune --restore"));
}

/// Issue 36: a span with a flag of capitals (`-D 60s`, `-T 5`) is a command line, parsed
/// like any other, so a renamed duration flag fails the docs' check; a placeholder still
/// makes a synopsis, after a flag too.
#[test]
fn issue36_command_lines_with_capital_flags_are_parsed() {
    assert!(!is_synopsis("jitterscope noise -D 10s -p 1"));
    assert!(!is_synopsis("jitterscope noise -T 5 -a 1-3"));
    assert!(is_synopsis("jitterscope noise -D DURATION"));
    assert!(is_synopsis("jitterscope noise --cpus=CPUS"));
    assert!(is_synopsis("jitterscope compare A-B.json"));
    let inline_d = command_lines()
        .into_iter()
        .filter(|s| s.inline && s.args.iter().any(|a| a == "-D"))
        .count();
    assert!(inline_d >= 9, "{inline_d} inline command lines with -D");
}

/// Issue 36: each test the docs cite by name (`issue30_…`, `module::test`) exists: a
/// test's `fn` in tests/ (in the module's file when it names one) or under src/.
#[test]
fn issue36_every_test_the_docs_cite_exists() {
    let files = |dir: &str, ext: &str| -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![std::path::PathBuf::from(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == ext) {
                    out.push((
                        p.display().to_string(),
                        std::fs::read_to_string(&p).unwrap(),
                    ));
                }
            }
        }
        out
    };
    let code: Vec<(String, String)> = [files("tests", "rs"), files("src", "rs")].concat();
    let mut docs = files("docs", "md");
    docs.push((
        "README.md".into(),
        std::fs::read_to_string("README.md").unwrap(),
    ));
    let modules: Vec<String> = (code.iter())
        .filter_map(|(p, _)| {
            p.strip_prefix("tests/")?
                .strip_suffix(".rs")
                .map(String::from)
        })
        .collect();
    let mut cited = 0;
    let mut missing = Vec::new();
    for (file, text) in &docs {
        for span in text.split('`').skip(1).step_by(2) {
            let parts: Vec<&str> = span.split("::").collect();
            let name = parts[parts.len() - 1];
            let ident = |w: &str| {
                !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            };
            let is_issue = name.strip_prefix("issue").is_some_and(|r| {
                r.split_once('_')
                    .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
            });
            let in_module = parts.len() == 2 && modules.iter().any(|m| m == parts[0]);
            if !parts.iter().all(|p| ident(p)) || !(is_issue || in_module) {
                continue;
            }
            cited += 1;
            let fun = format!("fn {name}(");
            let found = match in_module {
                true => (code.iter())
                    .any(|(p, t)| *p == format!("tests/{}.rs", parts[0]) && t.contains(&fun)),
                false => code.iter().any(|(_, t)| t.contains(&fun)),
            };
            if !found {
                missing.push(format!("{file}: `{span}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited, not found:\n{}",
        missing.join("\n")
    );
    assert!(cited >= 20, "{cited} tests cited");
}

#[test]
fn issue31_each_command_has_its_guide_page() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for command in jitterscope::app::manual::commands() {
        let page = jitterscope::app::manual::guide_page(&command);
        let path = root.join("docs/guide").join(&page);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (the page of {command})", path.display()));
        assert!(
            text.contains(&format!("jitterscope {command}")),
            "{page} names the command {command}"
        );
        assert!(
            readme.contains(&format!("(docs/guide/{page})")),
            "README links {page}"
        );
    }
    assert!(root.join("docs/guide/recipes.md").exists());
}

#[test]
fn issue31_the_readme_is_short_and_opens_with_its_two_commands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 300, "README.md has {} lines", lines.len());
    let head = lines[..10.min(lines.len())].join("\n");
    assert!(head.contains("cargo run --release"), "{head}");
    assert!(head.contains("scripts/test"), "{head}");
}

/// Relative links between the docs lead to files that exist.
#[test]
fn issue31_links_between_the_docs_lead_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    for (file, text) in docs() {
        let dir = root.join(&file).parent().unwrap().to_path_buf();
        for (i, line) in text.lines().enumerate() {
            for part in line.split("](").skip(1) {
                let target = part.split(')').next().unwrap_or("");
                let target = target.split('#').next().unwrap_or("");
                if target.is_empty() || target.contains("://") {
                    continue;
                }
                if !dir.join(target).exists() {
                    broken.push(format!("{file}:{}: {target}", i + 1));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
