//! Certificates and keys for a local control plane, generated in Rust (rcgen): a CA, the API
//! server's serving certificate, client certificates with the identities and groups upstream's
//! RBAC bootstrap policy expects, and the service-account key pair. Plus kubeconfigs that embed
//! them.

use super::error::LocalError;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A client identity: certificate subject CN and O (groups).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Identity {
    /// File stem and kubeconfig user name.
    pub(crate) name: &'static str,
    /// Common name: the user.
    pub(crate) cn: &'static str,
    /// Organization: the group, if any.
    pub(crate) org: Option<&'static str>,
}

/// The identities of a local cluster.
pub(crate) const IDENTITIES: [Identity; 3] = [
    // The harness (observer, fake nodes, faults through the API) and `kubectl`.
    Identity {
        name: "admin",
        cn: "kubechaos-admin",
        org: Some("system:masters"),
    },
    Identity {
        name: "kube-scheduler",
        cn: "system:kube-scheduler",
        org: None,
    },
    Identity {
        name: "kube-controller-manager",
        cn: "system:kube-controller-manager",
        org: None,
    },
];

/// Paths of what [`generate`] wrote.
#[derive(Clone, Debug)]
pub(crate) struct Pki {
    /// Directory holding everything.
    pub(crate) dir: PathBuf,
}

impl Pki {
    /// `NAME.crt`.
    pub(crate) fn cert(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.crt"))
    }
    /// `NAME.key`.
    pub(crate) fn key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }
    /// The service-account public key.
    pub(crate) fn sa_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }
}

fn write(path: &Path, text: &str) -> Result<(), LocalError> {
    std::fs::write(path, text).map_err(LocalError::file("write", path))?;
    #[cfg(unix)]
    if path.extension().is_some_and(|e| e == "key") {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
    Ok(())
}

fn err(e: rcgen::Error) -> LocalError {
    LocalError::Certificates(e)
}

/// Generate everything into `dir`. `ips`: addresses the API server serves on.
pub(crate) fn generate(dir: &Path, ips: &[IpAddr]) -> Result<Pki, LocalError> {
    std::fs::create_dir_all(dir).map_err(LocalError::file("create", dir))?;
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "kubechaos-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    write(&dir.join("ca.crt"), &ca_cert.pem())?;
    write(&dir.join("ca.key"), &ca_key.serialize_pem())?;
    let issuer = Issuer::new(ca, ca_key);

    // The front proxy's CA, as kubeadm makes one (`front-proxy-ca`): the controller-manager is
    // given it as kubeadm gives it, so its delegated authentication reads no ConfigMap at start.
    let fp_key = KeyPair::generate().map_err(err)?;
    let mut fp = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    fp.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    fp.distinguished_name
        .push(DnType::CommonName, "kubechaos-front-proxy-ca");
    fp.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let fp_cert = fp.self_signed(&fp_key).map_err(err)?;
    write(&dir.join("front-proxy-ca.crt"), &fp_cert.pem())?;
    write(&dir.join("front-proxy-ca.key"), &fp_key.serialize_pem())?;

    // Serving certificate.
    let key = KeyPair::generate().map_err(err)?;
    let mut p = CertificateParams::new(vec![
        "localhost".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default".to_owned(),
        "kubernetes.default.svc".to_owned(),
        "kubernetes.default.svc.cluster.local".to_owned(),
    ])
    .map_err(err)?;
    for ip in ips {
        p.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    p.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = p.signed_by(&key, &issuer).map_err(err)?;
    write(&dir.join("apiserver.crt"), &cert.pem())?;
    write(&dir.join("apiserver.key"), &key.serialize_pem())?;

    // Client certificates.
    for id in IDENTITIES {
        let key = KeyPair::generate().map_err(err)?;
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        p.distinguished_name.push(DnType::CommonName, id.cn);
        if let Some(org) = id.org {
            p.distinguished_name.push(DnType::OrganizationName, org);
        }
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &issuer).map_err(err)?;
        write(&dir.join(format!("{}.crt", id.name)), &cert.pem())?;
        write(&dir.join(format!("{}.key", id.name)), &key.serialize_pem())?;
    }

    // Service-account token signing key pair.
    let sa = KeyPair::generate().map_err(err)?;
    write(&dir.join("sa.key"), &sa.serialize_pem())?;
    write(&dir.join("sa.pub"), &sa.public_key_pem())?;
    Ok(Pki {
        dir: dir.to_path_buf(),
    })
}

/// A kubeconfig for `identity` against `server`, with the certificates embedded.
pub(crate) fn kubeconfig(
    pki: &Pki,
    identity: &str,
    server: &str,
    context: &str,
) -> Result<String, LocalError> {
    let b64 = |p: PathBuf| -> Result<String, LocalError> {
        let bytes = std::fs::read(&p).map_err(LocalError::file("read", &p))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    Ok(format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {context}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {identity}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {context}
  context:
    cluster: {context}
    user: {identity}
current-context: {context}
",
        ca = b64(pki.cert("ca"))?,
        cert = b64(pki.cert(identity))?,
        key = b64(pki.key(identity))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_and_a_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let pki = generate(dir.path(), &["127.0.0.1".parse().unwrap()]).unwrap();
        for f in [
            "ca.crt",
            "front-proxy-ca.crt",
            "ca.key",
            "apiserver.crt",
            "apiserver.key",
            "admin.crt",
            "kube-scheduler.key",
            "sa.key",
            "sa.pub",
        ] {
            assert!(dir.path().join(f).is_file(), "{f}");
        }
        assert!(std::fs::read_to_string(pki.sa_pub())
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----"));
        let kc = kubeconfig(&pki, "admin", "https://127.0.0.1:6443", "kubechaos").unwrap();
        assert!(kc.contains("current-context: kubechaos") && kc.contains("client-key-data: "));
    }
}
