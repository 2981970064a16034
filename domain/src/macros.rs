//! The impls every string-shaped domain type shares: text access, `FromStr`, serde as a
//! string parsed on the way in, and the SQL form (text columns or their domains).

/// Text access, `Display`, `FromStr`, serde and (with `postgres`) SQL for a newtype over
/// `String` with an inherent `parse(&str) -> Result<Self, ParseError>`.
macro_rules! text_newtype {
    ($name:ident) => {
        impl $name {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::ParseError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = <::std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&raw).map_err(::serde::de::Error::custom)
            }
        }

        text_sql!($name);
    };
}

/// A closed set of strings: the enum, its spellings (`as_str`, `parse`, `ALL`), serde,
/// schema (one documented `const` per value) and SQL, from one list.
macro_rules! string_enum {
    (
        $(#[doc = $doc:literal])*
        $what:literal
        pub enum $name:ident {
            $( $(#[doc = $vdoc:literal])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[doc = $vdoc])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire and stored spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value spelled `raw`.
            pub fn parse(raw: &str) -> Result<$name, $crate::ParseError> {
                match raw {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::ParseError::new(
                        $what,
                        concat!("must be one of:", $(" ", $text),+),
                    )),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::ParseError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s)
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = <::std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&raw).map_err(::serde::de::Error::custom)
            }
        }

        #[cfg(feature = "schema")]
        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                $crate::enum_schema(
                    concat!($($doc),*).trim(),
                    &[$(($text, concat!($($vdoc),*).trim())),+],
                )
            }
        }

        text_sql!($name);
    };
}

/// `ToSql`/`FromSql` of a type stored as text: bound as its `as_str()`, read back through
/// its `parse` (a stored value the parser refuses is an error, never a guess).
macro_rules! text_sql {
    ($name:ident) => {
        #[cfg(feature = "postgres")]
        impl ::postgres_types::ToSql for $name {
            fn to_sql(
                &self,
                ty: &::postgres_types::Type,
                out: &mut ::bytes::BytesMut,
            ) -> Result<::postgres_types::IsNull, Box<dyn ::std::error::Error + Sync + Send>> {
                <&str as ::postgres_types::ToSql>::to_sql(&self.as_str(), ty, out)
            }
            fn accepts(ty: &::postgres_types::Type) -> bool {
                <&str as ::postgres_types::ToSql>::accepts(ty)
            }
            ::postgres_types::to_sql_checked!();
        }

        #[cfg(feature = "postgres")]
        impl<'a> ::postgres_types::FromSql<'a> for $name {
            fn from_sql(
                ty: &::postgres_types::Type,
                raw: &'a [u8],
            ) -> Result<Self, Box<dyn ::std::error::Error + Sync + Send>> {
                let text = <&str as ::postgres_types::FromSql>::from_sql(ty, raw)?;
                Ok($name::parse(text)?)
            }
            fn accepts(ty: &::postgres_types::Type) -> bool {
                <&str as ::postgres_types::FromSql>::accepts(ty)
            }
        }
    };
}

/// The JSON Schema of a string type: its bounds and the pattern its parser checks, inlined
/// where it is used.
macro_rules! string_schema {
    ($name:ident, $($key:literal: $value:expr),+ $(,)?) => {
        #[cfg(feature = "schema")]
        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string", $($key: $value),+ })
            }
        }
    };
}
