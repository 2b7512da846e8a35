//! A host's kernel boot options as a fleet compares them: a set keyed by option name, the
//! order on the command line ignored, init's arguments (after `--`) and the options that
//! name the host itself left out.

use std::collections::BTreeMap;

/// Options that name the host's own disk, network address or boot files, left out of
/// the comparison: they differ between hosts set up alike, and none changes latency.
/// `BOOT_IMAGE` and `initrd` are the kernel's and initramfs's paths (the boot loader's
/// disk in them, and the release, which the fleet compares on its own); `root`,
/// `resume`, `resume_offset` and the dracut and cryptsetup device options the host's
/// disks (`UUID=…`, `PARTUUID=…`); `ip`, `BOOTIF`, `nfsroot`, `netroot` and
/// `rd.iscsi.initiator` its address, MAC or network root; `systemd.machine_id` and
/// `systemd.hostname` its name. Isolation and every other option are compared.
pub const IDENTITY: [&str; 19] = [
    "BOOT_IMAGE",
    "initrd",
    "root",
    "resume",
    "resume_offset",
    "cryptdevice",
    "rd.luks.uuid",
    "rd.luks.name",
    "rd.md.uuid",
    "rd.lvm.lv",
    "rd.lvm.vg",
    "ip",
    "BOOTIF",
    "nfsroot",
    "netroot",
    "rd.iscsi.initiator",
    "systemd.machine_id",
    "systemd.hostname",
    "hostname",
];

/// The kernel's options of `cmdline`, by name (`-` and `_` alike, as the kernel reads
/// names), each with the words that set it (`isolcpus=1-15`; an option given twice, as
/// `console=` often is, has both, sorted); identity options left out.
pub fn options(cmdline: &str) -> BTreeMap<String, String> {
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for word in kernel_words(cmdline) {
        let name = word.split('=').next().unwrap_or(word);
        if IDENTITY.contains(&name) {
            continue;
        }
        by_name
            .entry(name.replace('-', "_"))
            .or_default()
            .push(word);
    }
    (by_name.into_iter())
        .map(|(name, mut words)| {
            words.sort_unstable();
            (name, words.join(" "))
        })
        .collect()
}

/// The words of the command line the kernel takes: those before a bare `--` (the rest
/// are init's), split at spaces outside double quotes (`dyndbg="file x +p"` is one).
fn kernel_words(cmdline: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let (mut start, mut quoted) = (None, false);
    for (i, c) in cmdline.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if let Some(s) = start.take() {
                    words.push(&cmdline[s..i]);
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    words.extend(start.map(|s| &cmdline[s..]));
    words.into_iter().take_while(|w| *w != "--").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_a_set_of_the_kernels_own() {
        let a = options(
            "BOOT_IMAGE=/vmlinuz-6.1 root=UUID=1 nohz_full=1-15 isolcpus=1-15 quiet \
             console=ttyS0 console=tty0 -- single nohz=off",
        );
        let b = options(
            "BOOT_IMAGE=/boot/vmlinuz-6.2 root=UUID=2 console=tty0 quiet isolcpus=1-15 \
             nohz-full=1-15 console=ttyS0",
        );
        assert_eq!(a.get("isolcpus").unwrap(), "isolcpus=1-15");
        assert_eq!(a.get("console").unwrap(), "console=tty0 console=ttyS0");
        assert!(
            !a.contains_key("nohz"),
            "after -- the words are init's: {a:?}"
        );
        assert!(!a.contains_key("root") && !a.contains_key("BOOT_IMAGE"));
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>(),
            "order, identity and - for _ make no difference"
        );
        assert_ne!(a.get("nohz_full"), None);
        let c = options("isolcpus=1-3 quiet");
        assert_ne!(
            a.get("isolcpus"),
            c.get("isolcpus"),
            "one option, two values"
        );
    }

    #[test]
    fn a_quoted_value_is_one_word() {
        let o = options(r#"dyndbg="file x.c +p" quiet  -- a"#);
        assert_eq!(o.get("dyndbg").unwrap(), r#"dyndbg="file x.c +p""#);
        assert_eq!(o.len(), 2, "{o:?}");
        assert_eq!(kernel_words("  "), Vec::<&str>::new());
    }
}
