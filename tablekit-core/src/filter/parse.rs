//! A parser for the store's `$filter` dialect.
//!
//! Hand-written: the dialect is tiny (comparisons of a property with a typed
//! literal, `and`, `or`, `not`, parentheses) and no maintained crate parses
//! OData v3 filters. Keywords are case-sensitive, as on the real service.

use base64::Engine as _;

use super::{CompareOp, Filter};
use crate::datetime::DateTime;
use crate::error::InvalidInput;
use crate::validate::limits::MAX_FILTER_DEPTH;
use crate::value::Value;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    LParen,
    RParen,
    Ident(String),
    Literal(Value),
}

struct Lexer<'a> {
    text: &'a str,
    pos: usize,
}

fn syntax(position: usize, reason: impl Into<String>) -> InvalidInput {
    InvalidInput::FilterSyntax {
        position,
        reason: reason.into(),
    }
}

impl<'a> Lexer<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    /// Reads a `'…'` body starting at the opening quote; `''` is one quote.
    fn quoted(&mut self) -> Result<String, InvalidInput> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = self.rest();
            let Some(q) = rest.find('\'') else {
                return Err(syntax(start, "unterminated string literal"));
            };
            out.push_str(&rest[..q]);
            self.pos += q + 1;
            if self.rest().starts_with('\'') {
                out.push('\'');
                self.pos += 1;
            } else {
                return Ok(out);
            }
        }
    }

    fn next(&mut self) -> Result<Option<(usize, Token)>, InvalidInput> {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
        let start = self.pos;
        let Some(c) = trimmed.chars().next() else {
            return Ok(None);
        };
        let token = match c {
            '(' => {
                self.pos += 1;
                Token::LParen
            }
            ')' => {
                self.pos += 1;
                Token::RParen
            }
            '\'' => Token::Literal(Value::String(self.quoted()?)),
            '-' | '0'..='9' => self.number()?,
            c if c.is_alphabetic() || c == '_' => {
                let len = trimmed
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                    .unwrap_or(trimmed.len());
                let word = &trimmed[..len];
                self.pos += len;
                if self.rest().starts_with('\'') {
                    let body = self.quoted()?;
                    Token::Literal(typed_literal(start, word, &body)?)
                } else {
                    match word {
                        "true" => Token::Literal(Value::Boolean(true)),
                        "false" => Token::Literal(Value::Boolean(false)),
                        "NaN" => Token::Literal(Value::Double(f64::NAN)),
                        "INF" => Token::Literal(Value::Double(f64::INFINITY)),
                        _ => Token::Ident(word.to_owned()),
                    }
                }
            }
            other => return Err(syntax(start, format!("unexpected character {other:?}"))),
        };
        Ok(Some((start, token)))
    }

    fn number(&mut self) -> Result<Token, InvalidInput> {
        let start = self.pos;
        let rest = self.rest();
        if let Some(after) = rest.strip_prefix("-INF")
            && !after.starts_with(|c: char| c.is_alphanumeric())
        {
            self.pos += 4;
            return Ok(Token::Literal(Value::Double(f64::NEG_INFINITY)));
        }
        let len = rest
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_digit()
                    || c == '.'
                    || c == 'E'
                    || c == 'e'
                    || (c == '-' && i == 0)
                    || ((c == '+' || c == '-') && rest[..i].ends_with(['E', 'e'])))
            })
            .map_or(rest.len(), |(i, _)| i);
        let digits = &rest[..len];
        self.pos += len;
        let suffix = self.rest().chars().next();
        let bad = || syntax(start, format!("bad number {digits:?}"));
        let value = match suffix {
            Some('L') => {
                self.pos += 1;
                Value::Int64(digits.parse().map_err(|_| bad())?)
            }
            Some('D' | 'd') if digits.contains(['.', 'E', 'e']) => {
                self.pos += 1;
                Value::Double(digits.parse().map_err(|_| bad())?)
            }
            _ if digits.contains(['.', 'E', 'e']) => {
                Value::Double(digits.parse().map_err(|_| bad())?)
            }
            _ => Value::Int32(digits.parse().map_err(|_| bad())?),
        };
        if self
            .rest()
            .starts_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            return Err(bad());
        }
        Ok(Token::Literal(value))
    }
}

fn typed_literal(position: usize, prefix: &str, body: &str) -> Result<Value, InvalidInput> {
    match prefix {
        "datetime" => Ok(Value::DateTime(DateTime::parse(body)?)),
        "guid" => uuid::Uuid::try_parse(body)
            .map(Value::Guid)
            .map_err(|_| syntax(position, format!("bad GUID {body:?}"))),
        "X" | "binary" => decode_hex(body)
            .map(Value::Binary)
            .ok_or_else(|| syntax(position, format!("bad binary literal {body:?}"))),
        // Not produced by the renderer, but accepted: base64 binary.
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(body)
            .map(Value::Binary)
            .map_err(|_| syntax(position, "bad base64 literal")),
        other => Err(syntax(
            position,
            format!("unknown literal prefix `{other}`"),
        )),
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
    end: usize,
    /// How many `not`s and `(`s enclose the token being read.
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, t)| t)
    }

    fn position(&self) -> usize {
        self.tokens.get(self.next).map_or(self.end, |(p, _)| *p)
    }

    fn take(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.next).map(|(_, t)| t.clone());
        self.next += 1;
        token
    }

    fn keyword(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Ident(w)) if w == word) {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Filter, InvalidInput> {
        let mut left = self.and()?;
        while self.keyword("or") {
            left = left.or(self.and()?);
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Filter, InvalidInput> {
        let mut left = self.unary()?;
        while self.keyword("and") {
            left = left.and(self.unary()?);
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Filter, InvalidInput> {
        let nested = matches!(self.peek(), Some(Token::LParen))
            || matches!(self.peek(), Some(Token::Ident(w)) if w == "not");
        if !nested {
            return self.comparison();
        }
        // Each level is a level of recursion here: refuse text nested deeper
        // than any filter the service takes, before the stack runs out.
        if self.nesting >= MAX_FILTER_DEPTH {
            return Err(InvalidInput::FilterTooDeep {
                depth: self.nesting + 1,
                max: MAX_FILTER_DEPTH,
            });
        }
        self.nesting += 1;
        let inner = if self.keyword("not") {
            self.unary().map(Filter::negate)
        } else {
            self.next += 1;
            self.or().and_then(|inner| {
                if self.take() == Some(Token::RParen) {
                    Ok(inner)
                } else {
                    Err(syntax(self.position(), "expected `)`"))
                }
            })
        };
        self.nesting -= 1;
        inner
    }

    fn comparison(&mut self) -> Result<Filter, InvalidInput> {
        let position = self.position();
        let left = self.take();
        let op = match self.take() {
            Some(Token::Ident(word)) => match word.as_str() {
                "eq" => CompareOp::Eq,
                "ne" => CompareOp::Ne,
                "gt" => CompareOp::Gt,
                "ge" => CompareOp::Ge,
                "lt" => CompareOp::Lt,
                "le" => CompareOp::Le,
                _ => {
                    return Err(syntax(
                        position,
                        format!("expected a comparison operator, found `{word}`"),
                    ));
                }
            },
            _ => return Err(syntax(position, "expected a comparison operator")),
        };
        let right = self.take();
        match (left, right) {
            (Some(Token::Ident(property)), Some(Token::Literal(value))) => Ok(Filter::Compare {
                property,
                op,
                value,
            }),
            (Some(Token::Literal(value)), Some(Token::Ident(property))) => Ok(Filter::Compare {
                property,
                op: op.flipped(),
                value,
            }),
            _ => Err(syntax(
                position,
                "a comparison needs a property on one side and a constant on the other",
            )),
        }
    }
}

pub(super) fn parse(text: &str) -> Result<Filter, InvalidInput> {
    let mut lexer = Lexer { text, pos: 0 };
    let mut tokens = Vec::new();
    while let Some(token) = lexer.next()? {
        tokens.push(token);
    }
    let mut parser = Parser {
        tokens,
        next: 0,
        end: text.len(),
        nesting: 0,
    };
    let filter = parser.or()?;
    if parser.next < parser.tokens.len() {
        return Err(syntax(
            parser.position(),
            "unexpected text after the filter",
        ));
    }
    Ok(filter)
}
