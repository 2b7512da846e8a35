//! Issue 15, item 5: every sample output in the README comes from a run that
//! `scripts/readme-samples` can redo: each sits under a `<!-- sample: ARGS -->` marker,
//! starts with the command and the host it ran on, and no other code block holds output.

const README: &str = include_str!("../README.md");

#[test]
fn every_readme_sample_can_be_regenerated() {
    let lines: Vec<&str> = README.lines().collect();
    let mut samples = 0;
    let mut in_block: Option<bool> = None; // Some(marked) while inside a code block
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("```") {
            in_block = match in_block {
                Some(_) => None,
                None => {
                    let marked = i > 0 && lines[i - 1].starts_with("<!-- sample: ");
                    if marked {
                        samples += 1;
                        let args = lines[i - 1]
                            .trim_start_matches("<!-- sample: ")
                            .trim_end_matches(" -->")
                            .split('|')
                            .next()
                            .unwrap()
                            .trim();
                        let first = lines.get(i + 1).copied().unwrap_or("");
                        assert!(
                            first.starts_with(&format!("$ jitterscope {args}    # ")),
                            "README line {}: the sample must start with its command and host \
                             (run scripts/readme-samples): {first}",
                            i + 2
                        );
                    }
                    Some(marked)
                }
            };
            continue;
        }
        // Output (a clock line, a warning) outside a marked block cannot be redone.
        if in_block == Some(false) {
            assert!(
                !line.starts_with("clock: ") && !line.starts_with("jitterscope: warning"),
                "README line {}: output outside a sample marker: {line}",
                i + 1
            );
        }
    }
    assert!(samples >= 9, "{samples} samples");
}
