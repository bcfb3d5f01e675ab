//! `redial completions SHELL` prints a script the shell accepts, naming every command.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_redial");

#[test]
fn completion_scripts_name_every_command_and_bash_accepts_its_own() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let script = String::from_utf8(out.stdout).expect("utf-8");
        for word in [
            "serve",
            "dead-letters",
            "endpoints",
            "reset-breaker",
            "completions",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        if shell == "bash" {
            let mut check = Command::new("bash")
                .arg("-n")
                .stdin(std::process::Stdio::piped())
                .spawn()
                .expect("bash runs");
            use std::io::Write;
            check
                .stdin
                .take()
                .expect("stdin")
                .write_all(script.as_bytes())
                .expect("script written");
            assert!(
                check.wait().expect("bash ends").success(),
                "bash -n refused it"
            );
        }
    }
    let out = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}
