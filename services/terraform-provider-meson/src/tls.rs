//! go-plugin's AutoMTLS: Terraform hands the plugin its client certificate
//! (`PLUGIN_CLIENT_CERT`, PEM); the plugin makes a self-signed server
//! certificate, announces it on the handshake line, and accepts exactly
//! that client certificate.
//!
//! Terraform's certificate is ECDSA P-521, which ring (rustls' provider in
//! this workspace) does not verify: the client's handshake signature is
//! checked with RustCrypto's `p521` when it uses that curve, with ring's
//! algorithms otherwise.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::sync::Arc;

/// The server's certificate (DER) and the TLS configuration serving it.
pub struct Tls {
    pub cert_der: Vec<u8>,
    pub config: Arc<rustls::ServerConfig>,
}

/// Accepts one certificate, byte for byte, and checks its holder's
/// signature.
#[derive(Debug)]
struct ExactClient {
    cert: CertificateDer<'static>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ExactClient {
    fn check(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        tls13: bool,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme == SignatureScheme::ECDSA_NISTP521_SHA512 {
            return verify_p521(message, cert, dss.signature());
        }
        if tls13 {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
        } else {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
        }
    }
}

fn bad_signature() -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature)
}

fn verify_p521(
    message: &[u8],
    cert: &CertificateDer<'_>,
    signature: &[u8],
) -> Result<HandshakeSignatureValid, rustls::Error> {
    use p521::ecdsa::signature::Verifier;
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|_| bad_signature())?;
    let point = parsed.tbs_certificate.subject_pki.subject_public_key.data;
    let key = p521::ecdsa::VerifyingKey::from_sec1_bytes(&point).map_err(|_| bad_signature())?;
    let sig = p521::ecdsa::Signature::from_der(signature).map_err(|_| bad_signature())?;
    key.verify(message, &sig).map_err(|_| bad_signature())?;
    Ok(HandshakeSignatureValid::assertion())
}

impl ClientCertVerifier for ExactClient {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.check(message, cert, dss, false)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.check(message, cert, dss, true)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        let mut schemes = self.algorithms.supported_schemes();
        schemes.push(SignatureScheme::ECDSA_NISTP521_SHA512);
        schemes
    }
}

/// The first certificate of a PEM text, as DER.
fn pem_cert(pem: &str) -> Result<CertificateDer<'static>, String> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| format!("PLUGIN_CLIENT_CERT is not a PEM certificate: {e}"))
}

/// A fresh server certificate, as go-plugin makes its own: self-signed,
/// for `localhost`, valid for client and server authentication.
pub fn setup(client_cert_pem: &str) -> Result<Tls, String> {
    let client = pem_cert(client_cert_pem)?;
    let key =
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned()]).map_err(|e| e.to_string())?;
    params.subject_alt_names.push(rcgen::SanType::IpAddress(
        std::net::Ipv4Addr::LOCALHOST.into(),
    ));
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "meson");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::KeyAgreement,
        rcgen::KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    ];
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let cert_der = cert.der().to_vec();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(ExactClient {
        cert: client,
        algorithms: provider.signature_verification_algorithms,
    });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| e.to_string())?;
    // gRPC over TLS is HTTP/2, which Go's gRPC insists is negotiated.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Tls {
        cert_der,
        config: Arc::new(config),
    })
}
