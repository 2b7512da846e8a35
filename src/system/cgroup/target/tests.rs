//! The resolvers on fake trees: v1 and v2 layouts, both Kubernetes cgroup drivers,
//! docker, podman, containerd and CRI-O names.

use std::fs;
use std::path::Path;

use super::*;

const A: &str = "3f2a9c1b7d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcd";
const B: &str = "3f2b000000000000000000000000000000000000000000000000000000000001";
const UID: &str = "7c0e5b1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b";

fn mount(version: Version, point: &str, controllers: &[&str]) -> CgroupMount {
    CgroupMount {
        version,
        root: "/".into(),
        mount_point: point.into(),
        controllers: controllers.iter().map(|c| c.to_string()).collect(),
    }
}

/// A hybrid host: v1 `cpu`, systemd's named hierarchy and v2 at `unified`.
fn hybrid() -> Vec<CgroupMount> {
    vec![
        mount(Version::V1, "/sys/fs/cgroup/systemd", &["name=systemd"]),
        mount(Version::V2, "/sys/fs/cgroup/unified", &[]),
        mount(Version::V1, "/sys/fs/cgroup/cpu", &["cpu"]),
    ]
}

/// A group at `path` with these threads in its `file`.
fn group(root: &Path, path: &str, file: &str, tids: &[u32]) {
    let dir = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(&dir).unwrap();
    let text: String = tids.iter().map(|t| format!("{t}\n")).collect();
    fs::write(dir.join(file), text).unwrap();
}

fn paths(g: &[Group]) -> Vec<&str> {
    g.iter().map(|g| g.path.as_str()).collect()
}

#[test]
fn container_ids_are_read_from_every_runtimes_names() {
    for name in [
        format!("docker-{A}.scope"),
        format!("libpod-{A}.scope"),
        format!("libpod-{A}"),
        format!("cri-containerd-{A}.scope"),
        format!("crio-{A}.scope"),
        A.to_string(),
    ] {
        assert_eq!(container_id(&name), Some(A), "{name}");
    }
    assert_eq!(container_id(&format!("libpod-conmon-{A}.scope")), None);
    assert_eq!(container_id("sshd.service"), None);
    assert_eq!(
        container_id("docker-3f2a.scope"),
        None,
        "too short for an id"
    );
}

#[test]
fn pod_uids_are_read_from_both_drivers() {
    let systemd = format!("kubepods-burstable-pod{}.slice", UID.replace('-', "_"));
    assert_eq!(pod_uid(&systemd).as_deref(), Some(UID));
    assert_eq!(
        pod_uid(&format!("kubepods-pod{}.slice", UID.replace('-', "_"))).as_deref(),
        Some(UID)
    );
    assert_eq!(pod_uid(&format!("pod{UID}")).as_deref(), Some(UID));
    assert_eq!(pod_uid("kubepods-burstable.slice"), None);
    assert_eq!(pod_uid("podman.service"), None);
}

#[test]
fn a_container_is_found_by_a_prefix_in_the_cpu_hierarchy_first() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let scope = format!("/machine.slice/libpod-{A}.scope");
    group(r, &format!("sys/fs/cgroup/cpu{scope}"), "tasks", &[10, 11]);
    group(
        r,
        &format!("sys/fs/cgroup/cpu{scope}/container"),
        "tasks",
        &[12],
    );
    group(
        r,
        &format!("sys/fs/cgroup/unified{scope}"),
        "cgroup.threads",
        &[10],
    );
    group(
        r,
        &format!("sys/fs/cgroup/cpu/machine.slice/libpod-conmon-{A}.scope"),
        "tasks",
        &[9],
    );
    let g = resolve(r, &hybrid(), &Selector::Container("3F2A9".into())).unwrap();
    assert_eq!(
        paths(&g),
        vec![scope.as_str()],
        "the nested group is listed from above"
    );
    assert_eq!(g[0].mount, "/sys/fs/cgroup/cpu");
    let tids = threads(r, &g).unwrap();
    assert_eq!(
        tids,
        [10, 11, 12].into_iter().collect(),
        "the monitor's 9 is no part"
    );
}

#[test]
fn a_shared_prefix_or_a_missing_container_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    group(r, &format!("sys/fs/cgroup/cpu/docker/{A}"), "tasks", &[1]);
    group(r, &format!("sys/fs/cgroup/cpu/docker/{B}"), "tasks", &[2]);
    let e = resolve(r, &hybrid(), &Selector::Container("3f2".into())).unwrap_err();
    assert!(e.contains("starts 2 containers"), "{e}");
    let g = resolve(r, &hybrid(), &Selector::Container("3f2b".into())).unwrap();
    assert_eq!(paths(&g), vec![format!("/docker/{B}").as_str()]);
    let e = resolve(r, &hybrid(), &Selector::Container("ffff".into())).unwrap_err();
    assert!(e.starts_with("no container's cgroup has that id"), "{e}");
    let e = resolve(r, &hybrid(), &Selector::Container("xyz".into())).unwrap_err();
    assert!(e.contains("no container id"), "{e}");
}

/// Every container of the pod, either driver, v1 or v2; a container started later is
/// found by listing the pod's group again.
#[test]
fn a_pod_is_every_container_below_its_group_with_either_driver() {
    let under = UID.replace('-', "_");
    let layouts = [
        (
            Version::V2,
            "/sys/fs/cgroup",
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{under}.slice"),
            "cri-containerd-",
            ".scope",
        ),
        (
            Version::V1,
            "/sys/fs/cgroup/cpu",
            format!("/kubepods/burstable/pod{UID}"),
            "",
            "",
        ),
    ];
    for (version, point, pod, pre, post) in layouts {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let (file, controllers): (&str, &[&str]) = match version {
            Version::V1 => ("tasks", &["cpu"]),
            Version::V2 => ("cgroup.threads", &[]),
        };
        let mounts = vec![mount(version, point, controllers)];
        let base = format!("{}{pod}", point.trim_start_matches('/'));
        group(r, &base, file, &[]);
        group(r, &format!("{base}/{pre}{A}{post}"), file, &[20, 21]);
        group(r, &format!("{base}/{pre}{B}{post}"), file, &[30]);
        let g = resolve(r, &mounts, &Selector::Pod(UID.to_uppercase())).unwrap();
        assert_eq!(paths(&g), vec![pod.as_str()], "{point}");
        assert_eq!(threads(r, &g).unwrap(), [20, 21, 30].into_iter().collect());
        let later = "c0ffee00000000000000000000000000000000000000000000000000000000aa";
        group(r, &format!("{base}/{pre}{later}{post}"), file, &[40]);
        assert!(
            threads(r, &g).unwrap().contains(&40),
            "a container started later"
        );
        fs::remove_dir_all(r.join(&base)).unwrap();
        assert_eq!(threads(r, &g), None, "the pod gone");
        let e = resolve(r, &mounts, &Selector::Pod(UID.into())).unwrap_err();
        assert!(e.starts_with("no pod's cgroup"), "{e}");
    }
}

#[test]
fn a_unit_is_a_service_first_then_a_slice() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let v2 = vec![mount(Version::V2, "/sys/fs/cgroup", &[])];
    group(
        r,
        "sys/fs/cgroup/system.slice/chrony.service",
        "cgroup.threads",
        &[5],
    );
    group(r, "sys/fs/cgroup/machine.slice", "cgroup.threads", &[]);
    let g = resolve(r, &v2, &Selector::Unit("chrony".into())).unwrap();
    assert_eq!(paths(&g), vec!["/system.slice/chrony.service"]);
    let g = resolve(r, &v2, &Selector::Unit("machine".into())).unwrap();
    assert_eq!(paths(&g), vec!["/machine.slice"]);
    assert!(resolve(r, &v2, &Selector::Unit("nginx.service".into())).is_err());
}

#[test]
fn a_path_is_relative_to_a_mount_or_absolute() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    group(r, "sys/fs/cgroup/cpu/jsq/a", "tasks", &[7]);
    group(r, "sys/fs/cgroup/unified/only2", "cgroup.threads", &[8]);
    let g = resolve(r, &hybrid(), &Selector::Path("jsq/a/".into())).unwrap();
    assert_eq!(
        (g[0].path.as_str(), g[0].mount.as_str()),
        ("/jsq/a", "/sys/fs/cgroup/cpu")
    );
    let g = resolve(r, &hybrid(), &Selector::Path("/only2".into())).unwrap();
    assert_eq!(g[0].mount, "/sys/fs/cgroup/unified");
    let g = resolve(
        r,
        &hybrid(),
        &Selector::Path("/sys/fs/cgroup/cpu/jsq".into()),
    )
    .unwrap();
    assert_eq!(threads(r, &g).unwrap(), [7].into_iter().collect());
    assert!(
        resolve(
            r,
            &hybrid(),
            &Selector::Path("/sys/fs/cgroup/cpu/nope".into())
        )
        .is_err()
    );
    assert!(resolve(r, &hybrid(), &Selector::Path("nope".into())).is_err());
}

#[test]
fn a_tasks_owner_is_its_container_then_pod_then_unit() {
    let v1 = format!(
        "9:name=systemd:/system.slice/podman.service\n1:cpu:/machine.slice/libpod-{A}.scope\n0::/\n"
    );
    assert_eq!(owner_of(&v1), Owner::Container(A.into()));
    assert_eq!(owner_of(&v1).label(), "container 3f2a9c1b7d4e");
    let pod = format!(
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice\n",
        UID.replace('-', "_")
    );
    assert_eq!(owner_of(&pod), Owner::Pod(UID.into()));
    assert_eq!(
        owner_of("0::/system.slice/sshd.service\n"),
        Owner::Unit("sshd.service".into())
    );
    assert_eq!(owner_of("1:cpu:/\n0::/user.slice\n"), Owner::Host);
}

const POD: &str = "e36714c37922a68d5e219b91369a61e05b7f965f6d42da64d53de4e1a2996aef";

#[test]
fn podman_pod_ids_are_read_from_both_drivers() {
    assert_eq!(podman_pod_id("libpod_parent", POD), Some(POD));
    let slice = format!("machine-libpod_pod_{POD}.slice");
    assert_eq!(podman_pod_id("machine.slice", &slice), Some(POD));
    assert_eq!(
        podman_pod_id("docker", POD),
        None,
        "docker's cgroupfs container"
    );
    assert_eq!(podman_pod_id("libpod_parent", &format!("libpod-{A}")), None);
    assert_eq!(podman_pod_id("libpod_parent", "conmon"), None);
}

/// A podman pod as podman 4.3 lays it out here (cgroupfs: `libpod_parent/<pod>/libpod-<c>`
/// and the pod's `conmon`), and with the systemd driver: found by its id or a prefix,
/// every container below it, one started later too; the pod's bare id is no container.
#[test]
fn a_podman_pod_is_every_container_below_its_group_with_either_driver() {
    let layouts = [
        (
            format!("/libpod_parent/{POD}"),
            format!("libpod-{A}"),
            format!("libpod-{B}"),
        ),
        (
            format!("/machine.slice/machine-libpod_pod_{POD}.slice"),
            format!("libpod-{A}.scope"),
            format!("libpod-{B}.scope"),
        ),
    ];
    for (pod, a, b) in layouts {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mounts = vec![mount(Version::V1, "/sys/fs/cgroup/cpu", &["cpu"])];
        let base = format!("sys/fs/cgroup/cpu{pod}");
        group(r, &base, "tasks", &[]);
        group(r, &format!("{base}/conmon"), "tasks", &[19]);
        group(r, &format!("{base}/{a}"), "tasks", &[20, 21]);
        for sel in [POD, &POD[..12], &POD.to_uppercase()[..5]] {
            let g = resolve(r, &mounts, &Selector::Pod(sel.into())).unwrap();
            assert_eq!(paths(&g), vec![pod.as_str()], "{sel}");
        }
        let g = resolve(r, &mounts, &Selector::Pod(POD[..12].into())).unwrap();
        assert_eq!(threads(r, &g).unwrap(), [19, 20, 21].into_iter().collect());
        group(r, &format!("{base}/{b}"), "tasks", &[30]);
        assert!(
            threads(r, &g).unwrap().contains(&30),
            "a container started later"
        );
        let e = resolve(r, &mounts, &Selector::Container(POD[..12].into())).unwrap_err();
        assert!(
            e.starts_with("no container's cgroup"),
            "the pod is no container: {e}"
        );
        let c = resolve(r, &mounts, &Selector::Container(A[..12].into())).unwrap();
        assert_eq!(paths(&c), vec![format!("{pod}/{a}").as_str()]);
    }
}

#[test]
fn a_prefix_two_podman_pods_share_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let other = format!("{}0", &POD[..63]);
    group(
        r,
        &format!("sys/fs/cgroup/cpu/libpod_parent/{POD}"),
        "tasks",
        &[],
    );
    group(
        r,
        &format!("sys/fs/cgroup/cpu/libpod_parent/{other}"),
        "tasks",
        &[],
    );
    let mounts = vec![mount(Version::V1, "/sys/fs/cgroup/cpu", &["cpu"])];
    let e = resolve(r, &mounts, &Selector::Pod(POD[..12].into())).unwrap_err();
    assert!(e.contains("starts 2 pods' ids"), "{e}");
    let e = resolve(r, &mounts, &Selector::Pod("ffff".into())).unwrap_err();
    assert!(e.starts_with("no pod's cgroup"), "{e}");
}

#[test]
fn a_task_in_a_podman_pod_is_its_container_else_the_pod() {
    let cgroupfs = format!("1:cpu:/libpod_parent/{POD}/libpod-{A}\n0::/\n");
    assert_eq!(owner_of(&cgroupfs), Owner::Container(A.into()));
    let conmon = format!("1:cpu:/libpod_parent/{POD}/conmon\n0::/\n");
    assert_eq!(owner_of(&conmon), Owner::Pod(POD.into()));
    assert_eq!(owner_of(&conmon).label(), "pod e36714c37922");
    let systemd = format!("0::/machine.slice/machine-libpod_pod_{POD}.slice\n");
    assert_eq!(owner_of(&systemd), Owner::Pod(POD.into()));
}
