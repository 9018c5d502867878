//! Who counts as kube-scheduler: the peer addresses of the loopback in every form a socket
//! reports them, and a certified connection from anywhere.

use super::*;

#[test]
fn loopback_peers_and_certified_connections_are_trusted_and_nobody_else() {
    let cases: &[(Option<&str>, bool, Caller)] = &[
        (Some("127.0.0.1:40000"), false, Caller::Loopback),
        // The whole of 127.0.0.0/8 is loopback.
        (Some("127.3.2.1:40000"), false, Caller::Loopback),
        (Some("[::1]:40000"), false, Caller::Loopback),
        // An IPv4 loopback caller on a dual-stack socket.
        (Some("[::ffff:127.0.0.1]:40000"), false, Caller::Loopback),
        (Some("10.244.1.7:40000"), false, Caller::Other),
        (Some("[::ffff:10.244.1.7]:40000"), false, Caller::Other),
        (Some("[2001:db8::1]:40000"), false, Caller::Other),
        // The pod's own address is not its loopback: other pods reach it there.
        (Some("192.168.3.4:40000"), false, Caller::Other),
        (Some("0.0.0.0:40000"), false, Caller::Other),
        // A request whose peer the server could not read is nobody's.
        (None, false, Caller::Other),
        (Some("10.244.1.7:40000"), true, Caller::Certified),
        (None, true, Caller::Certified),
    ];
    for (peer, certified, want) in cases {
        let addr = peer.map(|p| p.parse::<SocketAddr>().unwrap());
        assert_eq!(classify(addr, *certified), *want, "{peer:?} certified={certified}");
    }
}

#[test]
fn each_gated_path_is_counted_under_its_door() {
    for (path, want) in [
        ("/filter", "filter"),
        ("/bind", "bind"),
        ("/prioritize", "prioritize"),
        ("/preempt", "preempt"),
        ("/usage", "usage"),
        ("/", "console"),
    ] {
        assert_eq!(door(path), want);
    }
}
