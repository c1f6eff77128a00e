//! Closed sets of words (statuses, states, roles) as Rust enums, each with
//! its one spelling on the wire and in the database. The store implements
//! its column traits for them (`store/columns.rs`), so a row holding a word
//! outside its set fails to decode rather than travelling on as a string.

/// Declares `enum $name { $variant = "word", … }` with `as_str`, `parse`,
/// `ALL`, `Display`, `Serialize` and `Deserialize` (as the word; any other
/// word is refused) and the OpenAPI schema (a string enum of the words).
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident = $word:literal),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name { $($(#[$variant_meta])* $variant),+ }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text { $($word => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(deserializer)?;
                $name::parse(&word)
                    .ok_or_else(|| serde::de::Error::unknown_variant(&word, &[$($word),+]))
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($word),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
}
pub(crate) use closed_set;
