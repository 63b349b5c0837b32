//! A cluster's PKI and kubeadm credentials, made once when the cluster is
//! created and stored sealed (see [`crate::secretbox`]).
//!
//! Decisions:
//! - Every key is ECDSA P-256. rcgen runs on ring, which cannot generate RSA
//!   keys, and nothing here needs RSA: kubeadm loads pre-provided CAs of any
//!   key type it can parse (PKCS#8 `PRIVATE KEY` PEMs included) and signs the
//!   leaf certificates it makes with them; kube-apiserver signs and verifies
//!   service-account tokens with an ECDSA `sa.key` (ES256) on every version,
//!   and kubeadm uses an existing `sa.key` as it is, whatever its
//!   `encryptionAlgorithm`. (An OIDC consumer that accepts only RS256
//!   service-account tokens would need an RSA `sa.key`; none is in scope.)
//! - The three CAs kubeadm accepts pre-provided, with its own common names:
//!   the cluster CA (`kubernetes`), the front-proxy CA (`front-proxy-ca`) and
//!   the etcd CA (`etcd-ca`), valid 10 years like kubeadm's. Each also
//!   carries the cluster name as its OU, so that two clusters' CAs can be
//!   told apart. Because all three are made here, every control-plane node
//!   gets the same files and `kubeadm join --control-plane` needs neither
//!   `--upload-certs` nor `--certificate-key`; the certificate key is made
//!   anyway for a workflow that wants kubeadm's upload-certs path.
//! - Certificates start a minute in the past, for clocks slightly behind.
//! - Admin kubeconfigs are signed by a fourth CA of meson's own, the *admin
//!   CA* (`meson-admin-ca`), never by the cluster CA: the API servers trust
//!   client certificates from a bundle of both (`--client-ca-file`, see
//!   [`ClusterSecrets::client_ca_bundle`]). The cluster CA must stay
//!   trusted for the cluster's own clients (kubelets, controller manager,
//!   scheduler), so only a separate CA can be rotated on its own: a
//!   credentials rotation makes a new admin CA and a new bootstrap token
//!   ([`ClusterSecrets::begin_rotation`]), control-plane nodes made while
//!   it is pending trust the new admin CA instead of the old one, and once
//!   every control-plane node is replaced the new CA signs kubeconfigs
//!   ([`ClusterSecrets::finish_rotation`]): a kubeconfig issued before no
//!   longer authenticates anywhere.

use crate::error::KaasError;
use crate::text::{is_one_line, q};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, SecondsFormat, Utc};
use rand::rngs::OsRng;
use rand::{Rng, RngCore};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SerialNumber,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::Duration;
use time::OffsetDateTime;
use zeroize::Zeroize;

pub const CLUSTER_CA_CN: &str = "kubernetes";
pub const FRONT_PROXY_CA_CN: &str = "front-proxy-ca";
pub const ETCD_CA_CN: &str = "etcd-ca";
/// The CA signing admin kubeconfigs (meson's, not kubeadm's).
pub const ADMIN_CA_CN: &str = "meson-admin-ca";
/// How many revoked bootstrap token ids are remembered (control-plane nodes
/// delete them from the cluster when they boot).
pub const REVOKED_TOKENS_KEPT: usize = 4;
/// How long the CAs are valid (kubeadm's 10 years).
pub const CA_VALIDITY: Duration = Duration::from_secs(3650 * 24 * 3600);
/// The admin kubeconfig's user, as kubeadm names it.
pub const ADMIN_CN: &str = "kubernetes-admin";
/// The admin kubeconfig's group. kubeadm ≥ 1.29 puts its `admin.conf` user
/// in `kubeadm:cluster-admins` (bound to `cluster-admin` by kubeadm) and only
/// `super-admin.conf` in `system:masters`; meson's admin kubeconfig uses
/// `system:masters`, the built-in break-glass group that needs no RBAC
/// binding, bypasses RBAC and works on every version (a certificate in it
/// cannot be revoked before it expires: keep `valid_for` short).
pub const ADMIN_GROUP: &str = "system:masters";
/// The groups kubeadm gives its bootstrap tokens, so joining nodes may post CSRs.
pub const BOOTSTRAP_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
pub(crate) const BACKDATE: time::Duration = time::Duration::minutes(1);
const REDACTED: &str = "[redacted]";

/// A certificate and its private key, both PEM (the key PKCS#8).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Drop for CertAndKey {
    fn drop(&mut self) {
        self.key_pem.zeroize();
    }
}

impl fmt::Debug for CertAndKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertAndKey({REDACTED})")
    }
}

/// A key pair without a certificate (the service-account `sa.key`/`sa.pub`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPairPem {
    /// PKCS#8 `PRIVATE KEY` PEM.
    pub private_pem: String,
    /// SubjectPublicKeyInfo `PUBLIC KEY` PEM.
    pub public_pem: String,
}

impl Drop for KeyPairPem {
    fn drop(&mut self) {
        self.private_pem.zeroize();
    }
}

impl fmt::Debug for KeyPairPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyPairPem({REDACTED})")
    }
}

/// A kubeadm bootstrap token `[a-z0-9]{6}.[a-z0-9]{16}`: a public id and a
/// secret. Stored as that string.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BootstrapToken(String);

const TOKEN_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

fn random_token_chars(n: usize) -> String {
    (0..n)
        .map(|_| TOKEN_ALPHABET[OsRng.gen_range(0..TOKEN_ALPHABET.len())] as char)
        .collect()
}

impl BootstrapToken {
    /// A fresh token from the operating system's CSPRNG (~103 random bits).
    pub fn generate() -> BootstrapToken {
        BootstrapToken(format!(
            "{}.{}",
            random_token_chars(6),
            random_token_chars(16)
        ))
    }

    /// Checks kubeadm's format.
    pub fn parse(s: &str) -> Result<BootstrapToken, KaasError> {
        let ok = |part: &str, len: usize| {
            part.len() == len
                && part
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        };
        match s.split_once('.') {
            Some((id, secret)) if ok(id, 6) && ok(secret, 16) => Ok(BootstrapToken(s.to_owned())),
            _ => Err(KaasError::input(
                "bootstrap_token",
                "must match [a-z0-9]{6}.[a-z0-9]{16}",
            )),
        }
    }

    /// The public part (`kubeadm token list` shows it).
    pub fn id(&self) -> &str {
        &self.0[..6]
    }

    /// The secret part.
    pub fn secret(&self) -> &str {
        &self.0[7..]
    }

    /// The whole token, `id.secret`, as `kubeadm join --token` takes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `kube-system` Secret that makes this token valid in a running
    /// cluster (what `kubeadm token create` writes), to create through the
    /// API with an admin kubeconfig before nodes join with a rotated token.
    pub fn secret_manifest(&self, expires: DateTime<Utc>) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": format!("bootstrap-token-{}", self.id()),
                "namespace": "kube-system",
            },
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {
                "description": "meson node bootstrap token",
                "token-id": self.id(),
                "token-secret": self.secret(),
                "expiration": expires.to_rfc3339_opts(SecondsFormat::Secs, true),
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "true",
                "auth-extra-groups": BOOTSTRAP_TOKEN_GROUP,
            },
        })
    }
}

impl TryFrom<String> for BootstrapToken {
    type Error = KaasError;
    fn try_from(s: String) -> Result<Self, KaasError> {
        BootstrapToken::parse(&s)
    }
}

impl From<BootstrapToken> for String {
    fn from(t: BootstrapToken) -> String {
        t.0.clone()
    }
}

impl Drop for BootstrapToken {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootstrapToken({}.{REDACTED})", self.id())
    }
}

/// Everything secret a cluster has: what kubeadm needs pre-provided on the
/// control-plane nodes, and what nodes join with. Serialize it only into
/// [`crate::secretbox::seal_json`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSecrets {
    cluster_ca: CertAndKey,
    front_proxy_ca: CertAndKey,
    etcd_ca: CertAndKey,
    service_account: KeyPairPem,
    bootstrap_token: BootstrapToken,
    certificate_key: String,
    ca_cert_hash: String,
    /// Signs admin kubeconfigs. `None` only in secrets made before it
    /// existed: the cluster CA signs them then (and such kubeconfigs cannot
    /// be revoked by a rotation, the cluster CA staying trusted).
    #[serde(default)]
    admin_ca: Option<CertAndKey>,
    /// A credentials rotation under way.
    #[serde(default)]
    rotation: Option<Rotation>,
    /// Ids of bootstrap tokens replaced by a rotation, newest last: every
    /// control-plane node deletes them from the cluster when it boots.
    #[serde(default)]
    revoked_token_ids: Vec<String>,
}

/// The incoming credentials of a rotation: control-plane nodes made while
/// it is pending trust `admin_ca` (and not the outgoing one) and register
/// `bootstrap_token` in the cluster.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Rotation {
    admin_ca: CertAndKey,
    /// Taken into use (as [`ClusterSecrets::bootstrap_token`]) once a node
    /// that registered it is up; `None` from then on.
    bootstrap_token: Option<BootstrapToken>,
}

impl fmt::Debug for ClusterSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterSecrets({REDACTED})")
    }
}

impl Drop for ClusterSecrets {
    fn drop(&mut self) {
        self.certificate_key.zeroize();
    }
}

pub(crate) fn random_serial() -> SerialNumber {
    let mut b = [0u8; 16];
    OsRng.fill_bytes(&mut b);
    // Positive and 16 bytes long once encoded.
    b[0] = (b[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&b)
}

pub(crate) fn new_key() -> Result<KeyPair, KaasError> {
    Ok(KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?)
}

pub(crate) fn new_ca(common_name: &str, cluster_name: &str) -> Result<CertAndKey, KaasError> {
    let key = new_key()?;
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name
        .push(DnType::OrganizationalUnitName, cluster_name);
    p.distinguished_name.push(DnType::CommonName, common_name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let now = OffsetDateTime::now_utc();
    p.not_before = now - BACKDATE;
    p.not_after = now + CA_VALIDITY;
    p.serial_number = Some(random_serial());
    let cert = p.self_signed(&key)?;
    Ok(CertAndKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

pub(crate) fn pem_der(pem: &str, what: &'static str) -> Result<Vec<u8>, KaasError> {
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|_| KaasError::BadPem(what))?;
    Ok(pem.contents)
}

/// `sha256:<hex>` of a certificate's SubjectPublicKeyInfo, as
/// `kubeadm join --discovery-token-ca-cert-hash` wants it.
pub fn spki_sha256(cert_pem: &str) -> Result<String, KaasError> {
    const WHAT: &str = "CA certificate";
    let der = pem_der(cert_pem, WHAT)?;
    let (_, cert) =
        x509_parser::parse_x509_certificate(&der).map_err(|_| KaasError::BadPem(WHAT))?;
    Ok(format!(
        "sha256:{}",
        hex(&Sha256::digest(cert.tbs_certificate.subject_pki.raw))
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ClusterSecrets {
    /// Makes a new cluster's CAs, service-account key pair, bootstrap token
    /// and certificate key.
    pub fn generate(cluster_name: &str) -> Result<ClusterSecrets, KaasError> {
        if cluster_name.is_empty() || cluster_name.len() > 63 || !is_one_line(cluster_name) {
            return Err(KaasError::input(
                "cluster_name",
                "must be 1 to 63 characters on one line",
            ));
        }
        let cluster_ca = new_ca(CLUSTER_CA_CN, cluster_name)?;
        let sa = new_key()?;
        let mut certificate_key = [0u8; 32];
        OsRng.fill_bytes(&mut certificate_key);
        let secrets = ClusterSecrets {
            ca_cert_hash: spki_sha256(&cluster_ca.cert_pem)?,
            cluster_ca,
            front_proxy_ca: new_ca(FRONT_PROXY_CA_CN, cluster_name)?,
            etcd_ca: new_ca(ETCD_CA_CN, cluster_name)?,
            service_account: KeyPairPem {
                private_pem: sa.serialize_pem(),
                public_pem: sa.public_key_pem(),
            },
            bootstrap_token: BootstrapToken::generate(),
            certificate_key: hex(&certificate_key),
            admin_ca: Some(new_ca(ADMIN_CA_CN, cluster_name)?),
            rotation: None,
            revoked_token_ids: Vec::new(),
        };
        certificate_key.zeroize();
        Ok(secrets)
    }

    /// The cluster CA (`/etc/kubernetes/pki/ca.{crt,key}`).
    pub fn cluster_ca(&self) -> &CertAndKey {
        &self.cluster_ca
    }

    /// The front-proxy CA (`/etc/kubernetes/pki/front-proxy-ca.{crt,key}`).
    pub fn front_proxy_ca(&self) -> &CertAndKey {
        &self.front_proxy_ca
    }

    /// The etcd CA (`/etc/kubernetes/pki/etcd/ca.{crt,key}`).
    pub fn etcd_ca(&self) -> &CertAndKey {
        &self.etcd_ca
    }

    /// The service-account signing key pair (`/etc/kubernetes/pki/sa.{key,pub}`).
    pub fn service_account(&self) -> &KeyPairPem {
        &self.service_account
    }

    /// The token nodes join with.
    pub fn bootstrap_token(&self) -> &BootstrapToken {
        &self.bootstrap_token
    }

    /// 64 hex characters, for `kubeadm init/join --certificate-key`.
    pub fn certificate_key(&self) -> &str {
        &self.certificate_key
    }

    /// `sha256:<hex>` of the cluster CA's SubjectPublicKeyInfo, for
    /// `kubeadm join --discovery-token-ca-cert-hash`.
    pub fn ca_cert_hash(&self) -> String {
        self.ca_cert_hash.clone()
    }

    /// Replaces the bootstrap token with a fresh one. The new token is valid
    /// in a running cluster only once its Secret exists (see
    /// [`BootstrapToken::secret_manifest`]).
    pub fn rotate_bootstrap_token(&mut self) {
        self.bootstrap_token = BootstrapToken::generate();
    }

    /// The CA admin kubeconfigs are signed by now (the cluster CA in secrets
    /// made before the admin CA existed).
    pub fn admin_ca(&self) -> &CertAndKey {
        self.admin_ca.as_ref().unwrap_or(&self.cluster_ca)
    }

    /// The admin CA that control-plane nodes made now trust: the incoming
    /// one while a rotation is pending, else the current one.
    pub fn trusted_admin_ca(&self) -> &CertAndKey {
        match &self.rotation {
            Some(r) => &r.admin_ca,
            None => self.admin_ca(),
        }
    }

    /// The PEM bundle an API server made now authenticates client
    /// certificates with (`--client-ca-file`): the cluster CA (kubelets and
    /// the control plane's own clients) and [`Self::trusted_admin_ca`].
    pub fn client_ca_bundle(&self) -> String {
        let mut out = self.cluster_ca.cert_pem.clone();
        let admin = self.trusted_admin_ca();
        if admin.cert_pem != self.cluster_ca.cert_pem {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&admin.cert_pem);
        }
        out
    }

    /// Whether a credentials rotation is under way.
    pub fn rotation_pending(&self) -> bool {
        self.rotation.is_some()
    }

    /// Starts a credentials rotation: a new admin CA and a new bootstrap
    /// token, pending until [`Self::finish_rotation`]. False (and nothing
    /// changes) when one is already pending: a retried rotation goes on
    /// with the credentials it started.
    pub fn begin_rotation(&mut self, cluster_name: &str) -> Result<bool, KaasError> {
        if self.rotation.is_some() {
            return Ok(false);
        }
        self.rotation = Some(Rotation {
            admin_ca: new_ca(ADMIN_CA_CN, cluster_name)?,
            bootstrap_token: Some(BootstrapToken::generate()),
        });
        Ok(true)
    }

    /// The token a control-plane node made now makes valid in the cluster
    /// once it runs: the incoming one while a rotation has not taken it
    /// into use yet, else the one nodes join with.
    pub fn token_to_register(&self) -> &BootstrapToken {
        self.rotation
            .as_ref()
            .and_then(|r| r.bootstrap_token.as_ref())
            .unwrap_or(&self.bootstrap_token)
    }

    /// Ids of the tokens a control-plane node made now deletes from the
    /// cluster (never the one it joins with).
    pub fn revoked_token_ids(&self) -> &[String] {
        &self.revoked_token_ids
    }

    /// Nodes join with the rotation's token from now on (call once a node
    /// that registered it is up); the outgoing token is revoked. False when
    /// there was nothing to promote.
    pub fn promote_rotated_token(&mut self) -> bool {
        let Some(token) = self
            .rotation
            .as_mut()
            .and_then(|r| r.bootstrap_token.take())
        else {
            return false;
        };
        let old = std::mem::replace(&mut self.bootstrap_token, token);
        self.revoked_token_ids.push(old.id().to_owned());
        let extra = self
            .revoked_token_ids
            .len()
            .saturating_sub(REVOKED_TOKENS_KEPT);
        self.revoked_token_ids.drain(..extra);
        true
    }

    /// Ends a rotation (call once every control-plane node trusts the new
    /// admin CA): the new token is the join token, the new admin CA signs
    /// kubeconfigs. False when no rotation was pending.
    pub fn finish_rotation(&mut self) -> bool {
        self.promote_rotated_token();
        match self.rotation.take() {
            Some(r) => {
                self.admin_ca = Some(r.admin_ca);
                true
            }
            None => false,
        }
    }

    /// A new client certificate signed by the cluster CA: `CN=common_name`,
    /// `O=group` (the Kubernetes user and group), valid from a minute ago
    /// until `valid_for` from now, which must end before the CA does.
    pub fn client_certificate(
        &self,
        common_name: &str,
        group: Option<&str>,
        valid_for: Duration,
    ) -> Result<CertAndKey, KaasError> {
        sign_client(&self.cluster_ca, common_name, group, valid_for)
    }

    /// [`Self::client_certificate`], signed by the admin CA.
    pub fn admin_client_certificate(
        &self,
        common_name: &str,
        group: Option<&str>,
        valid_for: Duration,
    ) -> Result<CertAndKey, KaasError> {
        sign_client(self.admin_ca(), common_name, group, valid_for)
    }
}

/// A client certificate signed by `ca` (see [`ClusterSecrets::client_certificate`]).
pub(crate) fn sign_client(
    ca: &CertAndKey,
    common_name: &str,
    group: Option<&str>,
    valid_for: Duration,
) -> Result<CertAndKey, KaasError> {
    if valid_for.is_zero() {
        return Err(KaasError::input("valid_for", "must be positive"));
    }
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|_| KaasError::BadPem("CA key"))?;
    let ca_params = CertificateParams::from_ca_cert_pem(&ca.cert_pem)
        .map_err(|_| KaasError::BadPem("CA certificate"))?;
    let ca_not_after = ca_params.not_after;
    // rcgen signs with an issuer `Certificate`; re-signing the CA's own
    // parameters gives one with the same subject and key identifier.
    let issuer = ca_params.self_signed(&ca_key)?;

    let now = OffsetDateTime::now_utc();
    let not_after = time::Duration::try_from(valid_for)
        .ok()
        .and_then(|d| now.checked_add(d))
        .filter(|t| *t <= ca_not_after)
        .ok_or_else(|| {
            KaasError::input(
                "valid_for",
                format!("must end before the CA expires ({ca_not_after})"),
            )
        })?;

    let key = new_key()?;
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    if let Some(group) = group {
        p.distinguished_name.push(DnType::OrganizationName, group);
    }
    p.distinguished_name.push(DnType::CommonName, common_name);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    p.use_authority_key_identifier_extension = true;
    p.not_before = now - BACKDATE;
    p.not_after = not_after;
    p.serial_number = Some(random_serial());
    let cert = p.signed_by(&key, &issuer, &ca_key)?;
    Ok(CertAndKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A kubeconfig for `cluster_name` at `server` (`https://<vip>:6443`) whose
/// user is a new client certificate signed by the admin CA
/// ([`ClusterSecrets::admin_ca`]; the server is verified with the cluster
/// CA): `CN=`[`ADMIN_CN`],
/// `O=`[`ADMIN_GROUP`], valid from a minute ago until `valid_for` from now.
/// Cluster, user and context are named after the cluster (`<name>`,
/// `<name>-admin`, `<name>-admin@<name>`) so that kubeconfigs of several
/// clusters merge without clashing.
pub fn admin_kubeconfig(
    secrets: &ClusterSecrets,
    cluster_name: &str,
    server: &str,
    valid_for: Duration,
) -> Result<String, KaasError> {
    if cluster_name.is_empty() || !is_one_line(cluster_name) {
        return Err(KaasError::input(
            "cluster_name",
            "must be non-empty and on one line",
        ));
    }
    if !server.starts_with("https://")
        || server.len() <= "https://".len()
        || server.chars().any(char::is_whitespace)
        || !is_one_line(server)
    {
        return Err(KaasError::input(
            "server",
            "must be an https:// URL without spaces",
        ));
    }
    let client = secrets.admin_client_certificate(ADMIN_CN, Some(ADMIN_GROUP), valid_for)?;
    let user = format!("{cluster_name}-admin");
    let context = format!("{user}@{cluster_name}");
    let b64 = |pem: &str| q(&STANDARD.encode(pem));
    Ok(format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {cluster}\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         users:\n\
         - name: {user}\n  \
           user:\n    \
             client-certificate-data: {cert}\n    \
             client-key-data: {key}\n\
         contexts:\n\
         - name: {context}\n  \
           context:\n    \
             cluster: {cluster}\n    \
             user: {user}\n\
         current-context: {context}\n\
         preferences: {{}}\n",
        cluster = q(cluster_name),
        server = q(server),
        ca = b64(&secrets.cluster_ca.cert_pem),
        user = q(&user),
        cert = b64(&client.cert_pem),
        key = b64(&client.key_pem),
        context = q(&context),
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::OnceLock;
    use x509_parser::prelude::*;

    /// One set of secrets for the whole test binary (key generation is the
    /// slow part).
    pub(crate) fn secrets() -> &'static ClusterSecrets {
        static S: OnceLock<ClusterSecrets> = OnceLock::new();
        S.get_or_init(|| ClusterSecrets::generate("test8").unwrap())
    }

    fn der(pem: &str) -> Vec<u8> {
        pem_der(pem, "certificate").unwrap()
    }

    fn cn(name: &X509Name<'_>) -> String {
        name.iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn cas_are_self_signed_ten_year_cas_with_kubeadm_names() {
        let s = secrets();
        for (ca, want) in [
            (s.cluster_ca(), CLUSTER_CA_CN),
            (s.front_proxy_ca(), FRONT_PROXY_CA_CN),
            (s.etcd_ca(), ETCD_CA_CN),
        ] {
            assert!(ca.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(ca.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
            let d = der(&ca.cert_pem);
            let (_, cert) = parse_x509_certificate(&d).unwrap();
            assert_eq!(cn(cert.subject()), want);
            assert_eq!(cert.subject(), cert.issuer());
            assert!(cert.is_ca());
            let ou: Vec<_> = cert.subject().iter_organizational_unit().collect();
            assert_eq!(ou[0].as_str().unwrap(), "test8");
            let ku = cert.key_usage().unwrap().unwrap().value;
            assert!(ku.key_cert_sign() && ku.digital_signature());
            cert.verify_signature(None).unwrap();
            let v = cert.validity();
            let years =
                (v.not_after.timestamp() - v.not_before.timestamp()) as f64 / (365.0 * 86400.0);
            assert!((9.9..10.1).contains(&years), "{years}");
            assert!(v.is_valid());
            // The key is the certificate's.
            let key = KeyPair::from_pem(&ca.key_pem).unwrap();
            assert_eq!(key.public_key_der(), cert.tbs_certificate.subject_pki.raw);
        }
        assert_ne!(s.cluster_ca().key_pem, s.etcd_ca().key_pem);
    }

    #[test]
    fn service_account_key_pair_matches() {
        let sa = secrets().service_account();
        assert!(sa.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(sa.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        let key = KeyPair::from_pem(&sa.private_pem).unwrap();
        assert_eq!(key.public_key_pem(), sa.public_pem);
    }

    #[test]
    fn tokens_and_certificate_key_have_kubeadms_formats() {
        let s = secrets();
        let t = s.bootstrap_token().as_str();
        let (id, secret) = t.split_once('.').unwrap();
        assert_eq!((id.len(), secret.len()), (6, 16));
        assert!(
            t.bytes()
                .all(|c| c == b'.' || c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_eq!(s.bootstrap_token().id(), id);
        assert_eq!(s.bootstrap_token().secret(), secret);
        assert_eq!(s.certificate_key().len(), 64);
        assert!(
            s.certificate_key()
                .bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        for bad in [
            "abcdef0123456789abcdef",
            "abcde.0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcdef.0123456789abcde!",
        ] {
            assert!(BootstrapToken::parse(bad).is_err(), "{bad}");
        }
        assert!(BootstrapToken::parse("abcdef.0123456789abcdef").is_ok());
        // Tokens differ every time.
        assert_ne!(BootstrapToken::generate(), BootstrapToken::generate());
    }

    #[test]
    fn ca_cert_hash_is_sha256_of_the_spki() {
        let s = secrets();
        let key = KeyPair::from_pem(&s.cluster_ca().key_pem).unwrap();
        let want = format!("sha256:{}", hex(&Sha256::digest(key.public_key_der())));
        assert_eq!(s.ca_cert_hash(), want);
        assert_eq!(spki_sha256(&s.cluster_ca().cert_pem).unwrap(), want);
        assert_eq!(want.len(), "sha256:".len() + 64);
    }

    #[test]
    fn rotating_the_token_keeps_everything_else() {
        let mut s = secrets().clone();
        let before = s.bootstrap_token().clone();
        s.rotate_bootstrap_token();
        assert_ne!(s.bootstrap_token(), &before);
        assert_eq!(s.cluster_ca(), secrets().cluster_ca());
        assert_eq!(s.ca_cert_hash(), secrets().ca_cert_hash());
    }

    #[test]
    fn secrets_round_trip_through_a_secretbox() {
        let key = crate::SecretKey::generate();
        let sealed = crate::secretbox::seal_json(&key, secrets(), b"cluster:1").unwrap();
        let back: ClusterSecrets =
            crate::secretbox::open_json(&key, &sealed, b"cluster:1").unwrap();
        assert_eq!(&back, secrets());
        // A tampered token is refused on the way in.
        let mut v = serde_json::to_value(secrets()).unwrap();
        v["bootstrap_token"] = "nope".into();
        assert!(serde_json::from_value::<ClusterSecrets>(v).is_err());
    }

    #[test]
    fn debug_is_redacted() {
        let s = secrets();
        let shown = format!(
            "{s:?} {:?} {:?} {:?}",
            s.cluster_ca(),
            s.service_account(),
            s.bootstrap_token()
        );
        assert!(!shown.contains("PRIVATE"), "{shown}");
        assert!(!shown.contains(s.bootstrap_token().secret()), "{shown}");
        assert!(!shown.contains(s.certificate_key()), "{shown}");
        assert!(shown.contains("[redacted]"));
        assert_eq!(format!("{s:?}"), "ClusterSecrets([redacted])");
    }

    #[test]
    fn bootstrap_token_secret_is_what_kubeadm_writes() {
        let t = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
        let expires = DateTime::parse_from_rfc3339("2030-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&Utc);
        let m = t.secret_manifest(expires);
        assert_eq!(m["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(m["metadata"]["namespace"], "kube-system");
        assert_eq!(m["type"], "bootstrap.kubernetes.io/token");
        assert_eq!(m["stringData"]["token-secret"], "0123456789abcdef");
        assert_eq!(m["stringData"]["expiration"], "2030-01-02T03:04:05Z");
        assert_eq!(m["stringData"]["auth-extra-groups"], BOOTSTRAP_TOKEN_GROUP);
    }

    /// The client certificate of a kubeconfig, parsed and checked: the
    /// server is verified with `server_ca_pem`, the client certificate is
    /// signed by `ca_pem`; returns (subject CN, subject O, not_before,
    /// not_after) as Unix seconds.
    pub(crate) fn parse_kubeconfig_client_cert(
        kubeconfig: &str,
        server_ca_pem: &str,
        ca_pem: &str,
    ) -> (String, String, i64, i64) {
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(kubeconfig).unwrap();
        let field = |path: &[&str]| -> String {
            let mut v = &doc;
            for p in path {
                v = match p.parse::<usize>() {
                    Ok(i) => &v[i],
                    Err(_) => &v[*p],
                };
            }
            v.as_str()
                .unwrap_or_else(|| panic!("{path:?} missing"))
                .to_owned()
        };
        let decode = |s: String| String::from_utf8(STANDARD.decode(s).unwrap()).unwrap();
        assert_eq!(
            decode(field(&[
                "clusters",
                "0",
                "cluster",
                "certificate-authority-data"
            ])),
            server_ca_pem
        );
        let cert_pem = decode(field(&["users", "0", "user", "client-certificate-data"]));
        let key_pem = decode(field(&["users", "0", "user", "client-key-data"]));

        let ca_der = der(ca_pem);
        let (_, ca) = parse_x509_certificate(&ca_der).unwrap();
        let cert_der = der(&cert_pem);
        let (_, cert) = parse_x509_certificate(&cert_der).unwrap();
        assert_eq!(cert.issuer(), ca.subject());
        cert.verify_signature(Some(ca.public_key()))
            .expect("signed by the cluster CA");
        // Signed by that CA and nothing else.
        let other = ClusterSecrets::generate("other").unwrap();
        let other_der = der(&other.cluster_ca().cert_pem);
        let (_, other_ca) = parse_x509_certificate(&other_der).unwrap();
        assert!(cert.verify_signature(Some(other_ca.public_key())).is_err());
        // The key is the certificate's.
        let key = KeyPair::from_pem(&key_pem).unwrap();
        assert_eq!(key.public_key_der(), cert.tbs_certificate.subject_pki.raw);
        // A client certificate, with the CA's key id as its authority key id.
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        assert!(!cert.is_ca());
        let aki = cert
            .extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                ParsedExtension::AuthorityKeyIdentifier(a) => a.key_identifier.clone(),
                _ => None,
            })
            .expect("authority key identifier");
        let ski = ca
            .extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(k) => Some(k.clone()),
                _ => None,
            })
            .expect("subject key identifier");
        assert_eq!(aki.0, ski.0);

        let o = cert
            .subject()
            .iter_organization()
            .next()
            .and_then(|a| a.as_str().ok())
            .unwrap_or_default()
            .to_owned();
        let v = cert.validity();
        (
            cn(cert.subject()),
            o,
            v.not_before.timestamp(),
            v.not_after.timestamp(),
        )
    }

    #[test]
    fn admin_kubeconfig_is_signed_by_the_admin_ca_and_expires_on_time() {
        let s = secrets();
        let valid_for = Duration::from_secs(3600);
        let before = OffsetDateTime::now_utc().unix_timestamp();
        let kc = admin_kubeconfig(s, "test8", "https://192.168.1.250:6443", valid_for).unwrap();
        let after = OffsetDateTime::now_utc().unix_timestamp();

        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&kc).unwrap();
        assert_eq!(doc["apiVersion"].as_str(), Some("v1"));
        assert_eq!(doc["kind"].as_str(), Some("Config"));
        assert_eq!(doc["current-context"].as_str(), Some("test8-admin@test8"));
        assert_eq!(
            doc["contexts"][0]["context"]["cluster"].as_str(),
            Some("test8")
        );
        assert_eq!(
            doc["contexts"][0]["context"]["user"].as_str(),
            Some("test8-admin")
        );
        assert_eq!(doc["clusters"][0]["name"].as_str(), Some("test8"));
        assert_eq!(doc["users"][0]["name"].as_str(), Some("test8-admin"));
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"].as_str(),
            Some("https://192.168.1.250:6443")
        );

        let (cn, o, nb, na) =
            parse_kubeconfig_client_cert(&kc, &s.cluster_ca().cert_pem, &s.admin_ca().cert_pem);
        assert_eq!(cn, ADMIN_CN);
        assert_eq!(o, ADMIN_GROUP);
        assert!((before - 61..=after - 59).contains(&nb), "not_before {nb}");
        assert!(
            (before + 3599..=after + 3600).contains(&na),
            "not_after {na}"
        );
        assert!(!kc.contains("PRIVATE KEY"), "key material is base64 only");
    }

    #[test]
    fn admin_kubeconfig_refuses_bad_input_and_quotes_names() {
        let s = secrets();
        let hour = Duration::from_secs(3600);
        assert!(admin_kubeconfig(s, "c", "http://1.2.3.4:6443", hour).is_err());
        assert!(admin_kubeconfig(s, "c", "https://1.2.3.4:6443\nx: y", hour).is_err());
        assert!(admin_kubeconfig(s, "", "https://1.2.3.4:6443", hour).is_err());
        assert!(admin_kubeconfig(s, "c", "https://1.2.3.4:6443", Duration::ZERO).is_err());
        // Beyond the CA's ten years.
        let err = admin_kubeconfig(s, "c", "https://1.2.3.4:6443", CA_VALIDITY * 2).unwrap_err();
        assert!(err.to_string().contains("valid_for"), "{err}");
        // A hostile name stays a value.
        let kc = admin_kubeconfig(s, "a\": b #", "https://1.2.3.4:6443", hour).unwrap();
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&kc).unwrap();
        assert_eq!(doc["clusters"][0]["name"].as_str(), Some("a\": b #"));
    }

    /// Whether `cert_pem` is signed by one of the CAs of a PEM bundle.
    fn trusted_by(bundle: &str, cert_pem: &str) -> bool {
        let cert_der = der(cert_pem);
        let (_, cert) = parse_x509_certificate(&cert_der).unwrap();
        x509_parser::pem::Pem::iter_from_buffer(bundle.as_bytes()).any(|p| {
            let p = p.unwrap();
            let (_, ca) = parse_x509_certificate(&p.contents).unwrap();
            cert.verify_signature(Some(ca.public_key())).is_ok()
        })
    }

    fn kubeconfig_cert(kc: &str) -> String {
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(kc).unwrap();
        let b64 = doc["users"][0]["user"]["client-certificate-data"]
            .as_str()
            .unwrap();
        String::from_utf8(STANDARD.decode(b64).unwrap()).unwrap()
    }

    #[test]
    fn the_admin_ca_is_its_own_ca_and_the_bundle_trusts_it_and_the_cluster_ca() {
        let s = secrets();
        let d = der(&s.admin_ca().cert_pem);
        let (_, ca) = parse_x509_certificate(&d).unwrap();
        assert_eq!(cn(ca.subject()), ADMIN_CA_CN);
        assert!(ca.is_ca());
        assert_ne!(s.admin_ca(), s.cluster_ca());
        let bundle = s.client_ca_bundle();
        assert!(bundle.starts_with(&s.cluster_ca().cert_pem));
        assert!(bundle.ends_with(&s.admin_ca().cert_pem));
        assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), 2);
        // Clients of the cluster CA (kubelets...) stay trusted.
        let kubelet = s
            .client_certificate(
                "system:node:n1",
                Some("system:nodes"),
                Duration::from_secs(60),
            )
            .unwrap();
        assert!(trusted_by(&bundle, &kubelet.cert_pem));
    }

    #[test]
    fn a_rotation_revokes_earlier_kubeconfigs_and_the_old_token() {
        let mut s = secrets().clone();
        let hour = Duration::from_secs(3600);
        let server = "https://10.0.0.1:6443";
        let before = kubeconfig_cert(&admin_kubeconfig(&s, "test8", server, hour).unwrap());
        let old_token = s.bootstrap_token().clone();
        let old_bundle = s.client_ca_bundle();
        assert!(trusted_by(&old_bundle, &before));
        assert_eq!(s.token_to_register(), &old_token);

        assert!(s.begin_rotation("test8").unwrap());
        assert!(s.rotation_pending());
        let staged = s.clone();
        assert!(
            !s.begin_rotation("test8").unwrap(),
            "a retry keeps what it began"
        );
        assert!(s == staged);
        // Nodes still join with the old token; new control-plane nodes
        // register the new one and trust only the new admin CA.
        assert_eq!(s.bootstrap_token(), &old_token);
        let new_token = s.token_to_register().clone();
        assert_ne!(new_token, old_token);
        let pending_bundle = s.client_ca_bundle();
        assert!(
            !trusted_by(&pending_bundle, &before),
            "the old admin CA is out"
        );
        assert!(pending_bundle.starts_with(&s.cluster_ca().cert_pem));
        // Kubeconfigs are still signed by the CA the running nodes trust.
        let during = kubeconfig_cert(&admin_kubeconfig(&s, "test8", server, hour).unwrap());
        assert!(trusted_by(&old_bundle, &during));

        // A node that registered the new token is up: joins use it.
        assert!(s.promote_rotated_token());
        assert!(!s.promote_rotated_token());
        assert_eq!(s.bootstrap_token(), &new_token);
        assert_eq!(s.token_to_register(), &new_token);
        assert_eq!(s.revoked_token_ids(), [old_token.id().to_owned()]);

        assert!(s.finish_rotation());
        assert!(!s.finish_rotation());
        assert!(!s.rotation_pending());
        assert_eq!(s.client_ca_bundle(), pending_bundle);
        let after = kubeconfig_cert(&admin_kubeconfig(&s, "test8", server, hour).unwrap());
        assert!(trusted_by(&pending_bundle, &after));
        assert!(!trusted_by(&pending_bundle, &before));
        assert!(!trusted_by(&pending_bundle, &during));
        // Everything kubeadm was given is untouched.
        assert_eq!(s.cluster_ca(), secrets().cluster_ca());
        assert_eq!(s.etcd_ca(), secrets().etcd_ca());
        assert_eq!(s.service_account(), secrets().service_account());

        // Finishing promotes the token too, and only a few ids are kept.
        for _ in 0..REVOKED_TOKENS_KEPT + 2 {
            s.begin_rotation("test8").unwrap();
            s.finish_rotation();
        }
        assert_eq!(s.revoked_token_ids().len(), REVOKED_TOKENS_KEPT);
        assert!(
            !s.revoked_token_ids()
                .contains(&s.bootstrap_token().id().to_owned())
        );
    }

    #[test]
    fn secrets_from_before_the_admin_ca_still_open_and_sign_with_the_cluster_ca() {
        let mut v = serde_json::to_value(secrets()).unwrap();
        let map = v.as_object_mut().unwrap();
        map.remove("admin_ca");
        map.remove("rotation");
        map.remove("revoked_token_ids");
        let mut s: ClusterSecrets = serde_json::from_value(v).unwrap();
        assert_eq!(s.admin_ca(), s.cluster_ca());
        assert_eq!(s.client_ca_bundle(), s.cluster_ca().cert_pem);
        // A rotation gives it an admin CA of its own.
        s.begin_rotation("test8").unwrap();
        s.finish_rotation();
        assert_ne!(s.admin_ca(), s.cluster_ca());
    }
}
