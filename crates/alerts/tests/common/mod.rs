//! What the alert tests share.

use std::sync::OnceLock;

/// A port the OS gave this test process (bound on 127.0.0.1:0 and read back), for the
/// lines the tests print: no number another program (another project's Corral) may
/// hold is written into a test.
pub fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port()
    })
}
