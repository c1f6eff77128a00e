//! The closed sets kept in TEXT columns (`domain::closed_set`), bound and
//! read as themselves. A stored word outside its set is a decode error, which
//! the store reports as corrupt data.

use sqlx::error::BoxDynError;
use sqlx::{Database, Decode, Encode, Type};

use crate::domain::capability::{LifecycleStatus, RevisionChange};
use crate::domain::credential::{AuthType, CredentialStatus};
use crate::domain::diagnostics::{GapKind, GapReason};
use crate::domain::interaction::{InteractionStatus, InteractionType};
use crate::domain::language::Language;
use crate::domain::message::MessageRole;
use crate::store::capability_tests::TestStatus;
use crate::store::idempotency::IdempotencyState;
use crate::store::mcp_calls::McpCallStatus;
use crate::store::platform::InboundState;
use crate::store::prompt_integrations::{IntegrationStatus, PromptOutcome};

/// Implements `Type`, `Encode` and `Decode` for every backend whose `str`
/// has them, through the set's `as_str` and `parse`.
macro_rules! text_column {
    ($($set:ty),+ $(,)?) => {$(
        impl<DB: Database> Type<DB> for $set
        where
            str: Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: Database> Encode<'q, DB> for $set
        where
            &'q str: Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as Database>::ArgumentBuffer<'q>,
            ) -> Result<sqlx::encode::IsNull, BoxDynError> {
                <&'q str as Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        impl<'r, DB: Database> Decode<'r, DB> for $set
        where
            &'r str: Decode<'r, DB>,
        {
            fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
                let word = <&'r str as Decode<'r, DB>>::decode(value)?;
                <$set>::parse(word).ok_or_else(|| {
                    format!("{word:?} is not a {}", stringify!($set)).into()
                })
            }
        }
    )+};
}

text_column!(
    LifecycleStatus,
    RevisionChange,
    AuthType,
    CredentialStatus,
    InteractionStatus,
    InteractionType,
    GapKind,
    GapReason,
    Language,
    TestStatus,
    McpCallStatus,
    MessageRole,
    IdempotencyState,
    InboundState,
    IntegrationStatus,
    PromptOutcome,
);
