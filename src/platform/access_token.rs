//! A number's send-API access token, sealed under the master keyring. The
//! associated data binds it to its account and number, so a sealed token
//! moved to another row does not open.

use zeroize::Zeroizing;

use crate::crypto::master_key::Keyring;
use crate::crypto::sealed::{SealError, Sealed};
use crate::domain::account::AccountId;
use crate::store::platform::PlatformNumberRow;

/// Tokens are visible ASCII, as an HTTP header value needs; this bounds them.
pub const MAX_TOKEN_BYTES: usize = 4096;

fn associated_data(account: AccountId, phone_number_id: &str) -> Vec<u8> {
    format!(
        "warden/platform-token/v1\0{}\0{phone_number_id}",
        account.number()
    )
    .into_bytes()
}

pub fn seal(keyring: &Keyring, account: AccountId, phone_number_id: &str, token: &str) -> Sealed {
    keyring.seal(token.as_bytes(), &associated_data(account, phone_number_id))
}

pub fn open(
    keyring: &Keyring,
    account: AccountId,
    phone_number_id: &str,
    sealed: &Sealed,
) -> Result<Zeroizing<String>, SealError> {
    let plain = keyring.open(sealed, &associated_data(account, phone_number_id))?;
    String::from_utf8(plain.to_vec())
        .map(Zeroizing::new)
        .map_err(|_| SealError::Corrupt)
}

/// A number's token sealed under the current master key, or `None` when
/// it already is (or the number has none): for `master-key rotate`.
pub fn reseal(keyring: &Keyring, row: &PlatformNumberRow) -> Result<Option<Sealed>, String> {
    let Some(sealed) = row.sealed_token() else {
        return Ok(None);
    };
    if sealed.key_id == keyring.current().id() {
        return Ok(None);
    }
    let plain = open(keyring, row.account(), &row.phone_number_id, &sealed)
        .map_err(|e| format!("access token of number {}: {e}", row.phone_number_id))?;
    Ok(Some(seal(
        keyring,
        row.account(),
        &row.phone_number_id,
        &plain,
    )))
}

/// The token as read from a file: one trailing newline trimmed, then it
/// must be 1 to [`MAX_TOKEN_BYTES`] visible ASCII characters.
pub fn from_file_text(text: &str) -> Result<&str, &'static str> {
    let token = text.strip_suffix('\n').unwrap_or(text);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
        return Err("the access token must be 1 to 4096 characters");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the access token must be visible ASCII characters only");
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_trimmed() {
        assert_eq!(from_file_text("EAAG123\n"), Ok("EAAG123"));
        assert_eq!(from_file_text("EAAG123\r\n"), Ok("EAAG123"));
        assert!(from_file_text("EAAG123\n\n").is_err());
        assert!(from_file_text("\n").is_err());
        assert!(from_file_text("with space").is_err());
    }
}
