//! Credentials of the clusters' autoscalers: mutual TLS with meson's
//! `externalgrpc` endpoint, the only authentication the upstream
//! cluster-autoscaler's `externalgrpc` cloud provider speaks (its cloud
//! config names a CA, a certificate and a key).
//!
//! One CA of meson's own (`meson-autoscaler-ca`, ECDSA P-256 like every key
//! here) signs the endpoint's server certificate and one client certificate
//! per cluster, `CN=cluster:<cluster id>`. The server trusts only that CA;
//! which certificate of a cluster is current is meson's to say (by serial),
//! so issuing a new one revokes the one before.

use crate::error::KaasError;
use crate::pki::{self, BACKDATE, CertAndKey};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use time::OffsetDateTime;

pub const AUTOSCALER_CA_CN: &str = "meson-autoscaler-ca";
const CLIENT_CN_PREFIX: &str = "cluster:";

/// The CA; stored sealed, made on first use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoscalerCa {
    pub ca: CertAndKey,
}

/// What a client certificate says of its holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoscalerIdentity {
    pub cluster: uuid::Uuid,
    /// The certificate's serial, lowercase hex.
    pub serial: String,
}

impl AutoscalerCa {
    pub fn generate() -> Result<AutoscalerCa, KaasError> {
        Ok(AutoscalerCa {
            ca: pki::new_ca(AUTOSCALER_CA_CN, "meson")?,
        })
    }

    /// A new client certificate for `cluster`'s autoscaler, and its serial.
    pub fn client_credential(
        &self,
        cluster: uuid::Uuid,
        valid_for: Duration,
    ) -> Result<(CertAndKey, String), KaasError> {
        let cert = pki::sign_client(
            &self.ca,
            &format!("{CLIENT_CN_PREFIX}{cluster}"),
            None,
            valid_for,
        )?;
        let der = pki::pem_der(&cert.cert_pem, "autoscaler certificate")?;
        let id = identity(&der).ok_or(KaasError::BadPem("autoscaler certificate"))?;
        Ok((cert, id.serial))
    }

    /// The endpoint's certificate, valid for `names` (DNS names or IP
    /// addresses, as the autoscalers dial it).
    pub fn server_certificate(
        &self,
        names: &[String],
        valid_for: Duration,
    ) -> Result<CertAndKey, KaasError> {
        if names.is_empty() {
            return Err(KaasError::input("names", "at least one name"));
        }
        let ca_key =
            KeyPair::from_pem(&self.ca.key_pem).map_err(|_| KaasError::BadPem("CA key"))?;
        let issuer = CertificateParams::from_ca_cert_pem(&self.ca.cert_pem)
            .map_err(|_| KaasError::BadPem("CA certificate"))?
            .self_signed(&ca_key)?;
        let key = pki::new_key()?;
        let mut p = CertificateParams::default();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name
            .push(DnType::CommonName, "meson-autoscaler-endpoint");
        p.subject_alt_names = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) if is_dns_name(n) => n
                    .clone()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(|_| KaasError::input("names", format!("'{n}' is not a DNS name"))),
                Err(_) => Err(KaasError::input(
                    "names",
                    format!("'{n}' is neither a DNS name nor an IP address"),
                )),
            })
            .collect::<Result<_, _>>()?;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.use_authority_key_identifier_extension = true;
        let now = OffsetDateTime::now_utc();
        p.not_before = now - BACKDATE;
        p.not_after = now
            + time::Duration::try_from(valid_for)
                .map_err(|_| KaasError::input("valid_for", "too long"))?;
        p.serial_number = Some(pki::random_serial());
        let cert = p.signed_by(&key, &issuer, &ca_key)?;
        Ok(CertAndKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn is_dns_name(n: &str) -> bool {
    (1..=253).contains(&n.len())
        && n.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// The cluster and serial of a client certificate (DER) meson issued; `None`
/// for anything else. The TLS handshake has already checked its signature.
pub fn identity(der: &[u8]) -> Option<AutoscalerIdentity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    let cluster = cn.strip_prefix(CLIENT_CN_PREFIX)?.parse().ok()?;
    Some(AutoscalerIdentity {
        cluster,
        serial: cert
            .raw_serial()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_certificate_names_its_cluster_and_serial() {
        let ca = AutoscalerCa::generate().unwrap();
        let cluster = uuid::Uuid::new_v4();
        let (cert, serial) = ca
            .client_credential(cluster, Duration::from_secs(3600))
            .unwrap();
        let der = pki::pem_der(&cert.cert_pem, "c").unwrap();
        let id = identity(&der).unwrap();
        assert_eq!((id.cluster, id.serial.as_str()), (cluster, serial.as_str()));
        // A second one has another serial.
        let (_, again) = ca
            .client_credential(cluster, Duration::from_secs(3600))
            .unwrap();
        assert_ne!(serial, again);
        // The CA and the server certificate are no client credential.
        assert_eq!(identity(&pki::pem_der(&ca.ca.cert_pem, "c").unwrap()), None);
        let server = ca
            .server_certificate(
                &["localhost".into(), "127.0.0.1".into()],
                Duration::from_secs(60),
            )
            .unwrap();
        assert_eq!(
            identity(&pki::pem_der(&server.cert_pem, "c").unwrap()),
            None
        );
        assert!(
            ca.server_certificate(&["a b".into()], Duration::from_secs(60))
                .is_err()
        );
    }
}
