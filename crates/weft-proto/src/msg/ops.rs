//! Requests typed to their replies.
//!
//! Every operation of a service is a struct of its own ([`Op`]), held by one variant of the
//! service's request enum, and names the type of its answer ([`Op::Reply`]), which one
//! variant of the service's reply enum carries ([`Payload`]). A client sends an op and gets
//! its answer's type back, or one error made in one place ([`take_reply`]) when a server
//! answers with another variant; a server's handler returns the answer's type and the
//! conversion into the reply enum is generated.
//!
//! The op lists are x-macros (`mdt_ops!`, `ost_ops!`, `ldlm_ops!`, `mgs_ops!`): each expands
//! a macro it is given with the whole list, so this crate builds the structs and enums from
//! it and a service builds its dispatch from the same list. Adding an opcode touches its
//! line in the list and its handler, nothing else.
//!
//! Wire compatibility: a variant holding a struct encodes exactly as a struct variant with
//! the same fields in the same order (postcard writes the variant index, then the fields),
//! so these types read and write the same bytes as the enums of struct variants before them.

use crate::error::WeftError;

/// A value that one variant of the reply enum `R` carries: an op's answer, taken out of and
/// put into its service's reply enum.
pub trait Payload<R>: Sized {
    /// The value, or the reply given back when it holds another variant.
    fn from_reply(reply: R) -> Result<Self, R>;
    fn into_reply(self) -> R;
}

/// Whether an op only reads: executing it twice, or abandoning it halfway, changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Mutation,
}

/// One operation of a service: held by the service's request enum [`Op::Request`], answered
/// with an [`Op::Reply`] inside the service's reply enum [`Op::Answer`].
pub trait Op: Into<Self::Request> {
    type Request;
    type Answer;
    type Reply: Payload<Self::Answer>;
    /// The name statistics and logs use, as Lustre names its opcodes where it can.
    const OPCODE: &'static str;
    const KIND: OpKind;
}

/// A reply enum's variant names, for messages.
pub trait Variant {
    fn variant(&self) -> &'static str;
}

/// The answer of `O` out of its service's reply, or the error saying what came instead.
pub fn take_reply<O: Op>(answer: O::Answer) -> Result<O::Reply, WeftError>
where
    O::Answer: Variant,
{
    O::Reply::from_reply(answer).map_err(|other| unexpected_reply(O::OPCODE, &other))
}

/// A service's answer out of a whole reply (`msg::ReplyBody`): a reply of another service is
/// a protocol error. Generic over the reply so this file does not name msg/mod.rs, which
/// names it.
pub fn service_answer<R: Variant, A: Payload<R>>(opcode: &str, reply: R) -> Result<A, WeftError> {
    A::from_reply(reply).map_err(|other| unexpected_reply(opcode, &other))
}

/// A server answered `opcode` with a reply of another kind (a bug, or peers of different
/// versions): the one place this sentence is made.
pub fn unexpected_reply(opcode: &str, reply: &dyn Variant) -> WeftError {
    WeftError::protocol(format!("unexpected {} reply to {opcode}", reply.variant()))
}

/// The op structs of one service and its request enum, from an op list: `kind Op { fields }
/// -> Reply = "opcode";` per op, `kind` being `read` or `write`.
#[macro_export]
#[doc(hidden)]
macro_rules! define_ops {
    (
        $Request:ident / $Answer:ident;
        $(
            $(#[$meta:meta])*
            $kind:ident $Op:ident { $( $(#[$fmeta:meta])* $field:ident : $fty:ty ),* $(,)? } -> $Reply:ty = $name:literal;
        )*
    ) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
            pub struct $Op { $( $(#[$fmeta])* pub $field: $fty, )* }

            impl From<$Op> for $Request {
                fn from(op: $Op) -> $Request {
                    $Request::$Op(op)
                }
            }

            impl $crate::msg::ops::Op for $Op {
                type Request = $Request;
                type Answer = $Answer;
                type Reply = $Reply;
                const OPCODE: &'static str = $name;
                const KIND: $crate::msg::ops::OpKind = $crate::op_kind!($kind);
            }
        )*

        /// Every operation of the service, one variant each (in wire order: add at the end).
        #[derive(Debug, Clone, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $Request {
            $( $Op($Op), )*
        }

        impl $Request {
            /// Short operation name for statistics and logs, as Lustre names them.
            pub fn opcode_name(&self) -> &'static str {
                match self {
                    $( $Request::$Op(_) => $name, )*
                }
            }

            pub fn kind(&self) -> $crate::msg::ops::OpKind {
                match self {
                    $( $Request::$Op(_) => $crate::op_kind!($kind), )*
                }
            }

            /// Whether the request changes state.
            pub fn is_mutation(&self) -> bool {
                self.kind() == $crate::msg::ops::OpKind::Mutation
            }
        }
    };
}

#[macro_export]
#[doc(hidden)]
macro_rules! op_kind {
    (read) => {
        $crate::msg::ops::OpKind::Read
    };
    (write) => {
        $crate::msg::ops::OpKind::Mutation
    };
}

/// A reply enum whose variants each carry one answer type: `Variant(Type)`, or
/// `Variant = Type` for a unit variant whose answer is a unit-like type (`()`).
#[macro_export]
#[doc(hidden)]
macro_rules! define_replies {
    (
        $(#[$meta:meta])*
        $Answer:ident {
            $( $(#[$vmeta:meta])* $Variant:ident $( ( $Ty:ty ) )? $( = $Unit:ty )? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $Answer {
            $( $(#[$vmeta])* $Variant $( ($Ty) )?, )*
        }

        impl $crate::msg::ops::Variant for $Answer {
            fn variant(&self) -> &'static str {
                match self {
                    $( $Answer::$Variant { .. } => stringify!($Variant), )*
                }
            }
        }

        $( $crate::reply_payload!($Answer, $Variant $( ( $Ty ) )? $( = $Unit )?); )*
    };
}

#[macro_export]
#[doc(hidden)]
macro_rules! reply_payload {
    ($Answer:ident, $Variant:ident ( $Ty:ty )) => {
        impl $crate::msg::ops::Payload<$Answer> for $Ty {
            fn from_reply(reply: $Answer) -> Result<Self, $Answer> {
                match reply {
                    $Answer::$Variant(value) => Ok(value),
                    other => Err(other),
                }
            }
            fn into_reply(self) -> $Answer {
                $Answer::$Variant(self)
            }
        }
    };
    ($Answer:ident, $Variant:ident = $Unit:ty) => {
        impl $crate::msg::ops::Payload<$Answer> for $Unit {
            fn from_reply(reply: $Answer) -> Result<Self, $Answer> {
                match reply {
                    $Answer::$Variant => Ok(Default::default()),
                    other => Err(other),
                }
            }
            fn into_reply(self) -> $Answer {
                $Answer::$Variant
            }
        }
    };
    // A unit variant that no op answers with by itself (a custom Payload covers it).
    ($Answer:ident, $Variant:ident) => {};
}
