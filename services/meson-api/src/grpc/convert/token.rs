//! API tokens: answers, and a create request as the REST one.

use super::json::Obj;
use super::meta::timestamp;
use meson_proto::meson::v1 as pb;
use meson_types as wire;
use serde_json::Value;

pub fn token(t: wire::token::ApiToken) -> pb::ApiToken {
    pb::ApiToken {
        id: t.id.to_string(),
        name: t.name,
        role: t.role,
        prefix: t.prefix,
        created_by: t.created_by,
        created: Some(timestamp(t.created)),
        expires: t.expires.map(timestamp),
        last_used: t.last_used.map(timestamp),
        revoked: t.revoked.map(timestamp),
        revoked_by: t.revoked_by,
    }
}

/// A `CreateTokenRequest` as the REST body of `POST /v1/tokens`: an empty
/// name or role is absent (and named as missing); `expires_in` is sent
/// whenever it is set, 0 included (and named as out of range).
pub fn token_create(r: &pb::CreateTokenRequest) -> Value {
    Obj::new()
        .str("name", &r.name)
        .str("role", &r.role)
        .opt("expires_in", r.expires_in)
        .value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rejected(r: &pb::CreateTokenRequest) -> Vec<String> {
        crate::grpc::convert::rejected(meson_core::token::TokenCreate::parse(&token_create(r)))
    }

    #[test]
    fn a_token_request_is_the_rest_one() {
        let r = pb::CreateTokenRequest {
            name: "ci-deploys".into(),
            role: "editor".into(),
            expires_in: Some(7_776_000),
        };
        assert_eq!(
            token_create(&r),
            json!({"name": "ci-deploys", "role": "editor", "expires_in": 7_776_000})
        );
        let never = pb::CreateTokenRequest {
            expires_in: None,
            ..r.clone()
        };
        assert_eq!(
            token_create(&never),
            json!({"name": "ci-deploys", "role": "editor"})
        );
        let (parsed, warnings) = meson_core::token::TokenCreate::parse(&token_create(&r)).unwrap();
        assert_eq!(
            (
                parsed.name.as_str(),
                parsed.role.as_str(),
                parsed.expires_in
            ),
            ("ci-deploys", "editor", Some(7_776_000))
        );
        assert!(warnings.is_empty());

        // Bad fields are named as REST names them.
        assert_eq!(
            rejected(&pb::CreateTokenRequest::default()),
            ["name", "role"]
        );
        let bad = |f: fn(&mut pb::CreateTokenRequest)| {
            let mut b = r.clone();
            f(&mut b);
            rejected(&b)
        };
        assert_eq!(bad(|b| b.role = "admin".into()), ["role"]);
        assert_eq!(bad(|b| b.name = "x".repeat(65)), ["name"]);
        assert_eq!(bad(|b| b.expires_in = Some(0)), ["expires_in"]);
        assert_eq!(bad(|b| b.expires_in = Some(59)), ["expires_in"]);
        assert_eq!(bad(|b| b.expires_in = Some(63_244_801)), ["expires_in"]);
    }
}
