//! The declaration of a wc tool, written on its handler.
//!
//! ```ignore
//! /// The project's Git state: branch, HEAD, upstream with ahead/behind, …
//! #[tool(reads, Files, "Git status", with_session(SessionUse::Works))]
//! async fn git_status(ctx: ToolContext, args: Args) -> Result<Out, ToolError> { … }
//! ```
//!
//! `#[tool(effect, Category, "Title", modifiers…)]` keeps the handler as written and adds the
//! module's `pub fn spec() -> ToolSpec`: the tool is named after its handler, its description is
//! the handler's doc comment (what a model reads to choose it), `effect` is the `ToolMeta`
//! constructor (`reads`, `changes` or `consequential`), `session = Works` is how it uses its
//! session (`SessionUse`), and each other modifier is a builder call — `scopes(…)` on the
//! `ToolMeta`, every other one on the `ToolSpec`. `#[tool_args]` derives
//! what an argument struct needs (`Debug`, `Deserialize`, `JsonSchema`, unknown fields
//! refused).

use proc_macro::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, ExprCall, Ident, ItemFn, Lit, LitStr, Meta, Token, parse_macro_input};

/// What `#[tool(…)]` says.
struct Declaration {
    effect: Ident,
    category: Ident,
    title: LitStr,
    session: Option<Ident>,
    modifiers: Vec<ExprCall>,
}

const EFFECTS: [&str; 3] = ["reads", "changes", "consequential"];

impl Parse for Declaration {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let effect: Ident = input.parse()?;
        if !EFFECTS.iter().any(|e| effect == e) {
            return Err(syn::Error::new(
                effect.span(),
                "the effect is one of `reads`, `changes`, `consequential`",
            ));
        }
        input.parse::<Token![,]>()?;
        let category = input.parse()?;
        input.parse::<Token![,]>()?;
        let title = input.parse()?;
        let (mut session, mut modifiers) = (None, Vec::new());
        while input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
            if input.peek(Ident) && input.peek2(Token![=]) {
                let key: Ident = input.parse()?;
                if key != "session" || session.is_some() {
                    return Err(syn::Error::new(
                        key.span(),
                        "the one `key = value` is `session`",
                    ));
                }
                input.parse::<Token![=]>()?;
                session = Some(input.parse()?);
            } else {
                modifiers.push(input.parse()?);
            }
        }
        Ok(Declaration {
            effect,
            category,
            title,
            session,
            modifiers,
        })
    }
}

/// The doc comment of `handler` as one line: the tool's description.
fn description(handler: &ItemFn) -> String {
    let lines: Vec<String> = handler
        .attrs
        .iter()
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                Expr::Lit(l) => match &l.lit {
                    Lit::Str(s) => Some(s.value().trim().to_owned()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .filter(|l| !l.is_empty())
        .collect();
    lines.join(" ")
}

/// Declares a tool on its handler; see the crate documentation.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let Declaration {
        effect,
        category,
        title,
        session,
        modifiers,
    } = parse_macro_input!(attr as Declaration);
    let handler = parse_macro_input!(item as ItemFn);
    let about = description(&handler);
    if about.is_empty() {
        return syn::Error::new(
            handler.sig.ident.span(),
            "a tool's doc comment is its description: write one",
        )
        .to_compile_error()
        .into();
    }
    let ident = &handler.sig.ident;
    let name = ident.to_string();
    let (meta_calls, spec_calls): (Vec<&ExprCall>, Vec<&ExprCall>) = modifiers
        .iter()
        .partition(|c| matches!(&*c.func, Expr::Path(p) if p.path.is_ident("scopes")));
    let session = session
        .map(|s| quote!(.with_session(crate::kernel::spec::SessionUse::#s)))
        .unwrap_or_default();
    quote! {
        /// The spec.
        pub fn spec() -> crate::kernel::spec::ToolSpec {
            let meta = crate::kernel::spec::ToolMeta::#effect(
                crate::kernel::spec::Category::#category,
                #name,
                #title,
            )
            .about(#about)
            #(.#meta_calls)*;
            crate::kernel::spec::ToolSpec::new(meta, #ident) #session #(.#spec_calls)*
        }

        #handler
    }
    .into()
}

/// Derives what a tool's argument struct needs: `Debug`, `Deserialize` refusing unknown
/// fields, and `JsonSchema` (the schema a caller reads and the validator checks).
#[proc_macro_attribute]
pub fn tool_args(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(
            proc_macro2::TokenStream::from(attr)
                .into_iter()
                .next()
                .map_or_else(proc_macro2::Span::call_site, |t| t.span()),
            "#[tool_args] takes no arguments",
        )
        .to_compile_error()
        .into();
    }
    let item = proc_macro2::TokenStream::from(item);
    quote! {
        #[derive(Debug, ::serde::Deserialize, ::schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #item
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_reads_its_effect_category_title_session_and_modifiers() {
        let d: Declaration = syn::parse_str(
            r#"consequential, Files, "Apply patch", session = Works, with_ledger_facts(facts), scopes(&[])"#,
        )
        .unwrap();
        assert_eq!(d.effect, "consequential");
        assert_eq!(d.category, "Files");
        assert_eq!(d.title.value(), "Apply patch");
        assert_eq!(d.session.unwrap(), "Works");
        assert_eq!(d.modifiers.len(), 2);
    }

    #[test]
    fn a_declaration_refuses_an_unknown_effect_and_a_second_session() {
        let err = syn::parse_str::<Declaration>(r#"writes, Files, "X""#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("`reads`, `changes`, `consequential`"), "{err}");
        let err = syn::parse_str::<Declaration>(r#"reads, Files, "X", session = A, session = B"#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("`session`"), "{err}");
    }

    #[test]
    fn the_description_is_the_doc_comment_as_one_line() {
        let handler: ItemFn = syn::parse_str(
            "/// Read files.\n///   Up to 64 of them.\n///\nasync fn read_files() {}",
        )
        .unwrap();
        assert_eq!(description(&handler), "Read files. Up to 64 of them.");
        let bare: ItemFn = syn::parse_str("async fn bare() {}").unwrap();
        assert_eq!(description(&bare), "");
    }
}
