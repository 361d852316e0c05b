//! A throwaway certificate authority and server certificate for TLS tests, made with
//! the `openssl` command line tool.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The files a TLS server and its clients need.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA certificate clients trust (PEM).
    pub ca_cert: PathBuf,
    /// The server certificate, for 127.0.0.1 and localhost, signed by the CA (PEM).
    pub server_cert: PathBuf,
    /// The server's private key (PEM).
    pub server_key: PathBuf,
}

impl TlsFiles {
    /// Makes a CA and a server certificate in `dir`.
    pub fn generate(dir: &Path) -> io::Result<Self> {
        let files = TlsFiles {
            ca_cert: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
        };
        let ca_key = dir.join("ca.key");
        let csr = dir.join("server.csr");
        let ext = dir.join("server.ext");
        std::fs::write(&ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")?;
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=latchkey test CA",
            "-keyout",
            s(&ca_key)?,
            "-out",
            s(&files.ca_cert)?,
        ])?;
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            s(&files.server_key)?,
            "-out",
            s(&csr)?,
        ])?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            s(&csr)?,
            "-CA",
            s(&files.ca_cert)?,
            "-CAkey",
            s(&ca_key)?,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            s(&ext)?,
            "-out",
            s(&files.server_cert)?,
        ])?;
        Ok(files)
    }
}

fn openssl(args: &[&str]) -> io::Result<()> {
    let output = Command::new("openssl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| crate::not_installed("openssl", &e))?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "openssl {} failed: {}",
            args[0],
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}

fn s(path: &Path) -> io::Result<&str> {
    path.to_str()
        .ok_or_else(|| io::Error::other(format!("temp path {} is not UTF-8", path.display())))
}
