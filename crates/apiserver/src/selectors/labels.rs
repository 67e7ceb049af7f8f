//! Label selectors: `=`, `==`, `!=`, `in`, `notin`, `key` (exists), `!key`, `>` and `<`,
//! comma-separated requirements that all must hold.

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Bang,
    NotEquals,
    Equals,
    DoubleEquals,
    Open,
    Close,
    Comma,
    In,
    NotIn,
    Gt,
    Lt,
}

fn describe(t: &Token) -> String {
    match t {
        Token::Ident(s) => s.clone(),
        Token::Bang => "!".into(),
        Token::NotEquals => "!=".into(),
        Token::Equals => "=".into(),
        Token::DoubleEquals => "==".into(),
        Token::Open => "(".into(),
        Token::Close => ")".into(),
        Token::Comma => ",".into(),
        Token::In => "in".into(),
        Token::NotIn => "notin".into(),
        Token::Gt => ">".into(),
        Token::Lt => "<".into(),
    }
}

fn lex(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Token::NotEquals);
                i += 2;
            }
            '!' => {
                out.push(Token::Bang);
                i += 1;
            }
            '=' if chars.get(i + 1) == Some(&'=') => {
                out.push(Token::DoubleEquals);
                i += 2;
            }
            '=' => {
                out.push(Token::Equals);
                i += 1;
            }
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            ',' => {
                out.push(Token::Comma);
                i += 1;
            }
            '>' => {
                out.push(Token::Gt);
                i += 1;
            }
            '<' => {
                out.push(Token::Lt);
                i += 1;
            }
            _ => {
                let start = i;
                while i < chars.len() && !chars[i].is_whitespace() && !"!=(),<>".contains(chars[i])
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                out.push(match word.as_str() {
                    "in" => Token::In,
                    "notin" => Token::NotIn,
                    _ => Token::Ident(word),
                });
            }
        }
    }
    out
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn fail(&self, found: Option<&Token>, expected: &str) -> ApiError {
        let found = found.map(describe).unwrap_or_else(|| "EOS".into());
        ApiError::bad_request(format!(
            "unable to parse requirement: found '{found}', expected: {expected}"
        ))
    }

    fn requirement(&mut self) -> Result<Requirement, ApiError> {
        let negated = if self.peek() == Some(&Token::Bang) {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Some(Token::Ident(k)) => k,
            other => return Err(self.fail(other.as_ref(), "identifier")),
        };
        validate_key(&key)?;
        if negated {
            return Ok(Requirement {
                key,
                op: Op::DoesNotExist,
                values: vec![],
            });
        }
        let op = match self.peek() {
            None | Some(Token::Comma) => {
                return Ok(Requirement {
                    key,
                    op: Op::Exists,
                    values: vec![],
                })
            }
            Some(Token::Equals) | Some(Token::DoubleEquals) => Op::Equals,
            Some(Token::NotEquals) => Op::NotEquals,
            Some(Token::In) => Op::In,
            Some(Token::NotIn) => Op::NotIn,
            Some(Token::Gt) => Op::GreaterThan,
            Some(Token::Lt) => Op::LessThan,
            other => {
                let other = other.cloned();
                return Err(self.fail(other.as_ref(), "=, !=, ==, in, notin, >, <"));
            }
        };
        self.pos += 1;
        let values = match op {
            Op::In | Op::NotIn => self.value_set()?,
            _ => match self.peek() {
                Some(Token::Ident(v)) => {
                    let v = v.clone();
                    self.pos += 1;
                    vec![v]
                }
                None | Some(Token::Comma) => vec![String::new()],
                other => {
                    let other = other.cloned();
                    return Err(self.fail(other.as_ref(), "identifier"));
                }
            },
        };
        for v in &values {
            match op {
                Op::GreaterThan | Op::LessThan => {
                    if v.parse::<i64>().is_err() {
                        return Err(ApiError::bad_request(format!(
                            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {v:?}"
                        )));
                    }
                }
                _ => validate_value(v)?,
            }
        }
        Ok(Requirement { key, op, values })
    }

    fn value_set(&mut self) -> Result<Vec<String>, ApiError> {
        match self.next() {
            Some(Token::Open) => {}
            other => return Err(self.fail(other.as_ref(), "(")),
        }
        let mut values = Vec::new();
        let mut expect_value = true;
        loop {
            match self.next() {
                Some(Token::Ident(v)) if expect_value => {
                    values.push(v);
                    expect_value = false;
                }
                Some(Token::Comma) => {
                    if expect_value {
                        values.push(String::new());
                    }
                    expect_value = true;
                }
                Some(Token::Close) => {
                    if expect_value {
                        values.push(String::new());
                    }
                    return Ok(values);
                }
                other => return Err(self.fail(other.as_ref(), ", or )")),
            }
        }
    }
}

impl LabelSelector {
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut parser = Parser {
            tokens: lex(input),
            pos: 0,
        };
        let mut requirements = Vec::new();
        if parser.tokens.is_empty() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(parser.requirement()?);
            match parser.next() {
                None => break,
                Some(Token::Comma) => continue,
                other => return Err(parser.fail(other.as_ref(), ",")),
            }
        }
        Ok(LabelSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// `labels` is sorted by key.
    pub fn matches(&self, labels: &[(String, String)]) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels
                .binary_search_by(|(k, _)| k.as_str().cmp(&r.key))
                .ok()
                .map(|i| labels[i].1.as_str());
            match r.op {
                Op::Equals => value == Some(r.values[0].as_str()),
                Op::NotEquals => value != Some(r.values[0].as_str()),
                Op::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotIn => !value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
                Op::GreaterThan | Op::LessThan => {
                    let (Some(v), Ok(limit)) = (value, r.values[0].parse::<i64>()) else {
                        return false;
                    };
                    let Ok(v) = v.parse::<i64>() else {
                        return false;
                    };
                    if r.op == Op::GreaterThan {
                        v > limit
                    } else {
                        v < limit
                    }
                }
            }
        })
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// A label name or value body: alphanumerics at both ends, `-_.` inside, at most 63.
pub fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars().all(is_name_char)
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// `[prefix/]name` with a DNS-subdomain prefix.
pub fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if !crate::meta::valid_dns_subdomain(p) {
            return false;
        }
    }
    !name.is_empty() && valid_label_value(name)
}

fn validate_key(key: &str) -> Result<(), ApiError> {
    if valid_label_key(key) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: key: Invalid value: {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )))
    }
}

fn validate_value(v: &str) -> Result<(), ApiError> {
    if valid_label_value(v) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: values[0][{v}]: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut v: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        v.sort();
        v
    }

    fn m(sel: &str, l: &[(&str, &str)]) -> bool {
        LabelSelector::parse(sel).unwrap().matches(&labels(l))
    }

    #[test]
    fn every_operator() {
        let l = [("app", "web"), ("tier", "front"), ("n", "5")];
        assert!(m("app=web", &l));
        assert!(m("app==web", &l));
        assert!(!m("app!=web", &l));
        assert!(m("missing!=x", &l));
        assert!(m("app in (web, db)", &l));
        assert!(!m("app notin (web,db)", &l));
        assert!(m("missing notin (a)", &l));
        assert!(m("tier", &l));
        assert!(m("!missing", &l));
        assert!(!m("!tier", &l));
        assert!(m("n>4,n<6", &l));
        assert!(!m("app=web,tier=back", &l));
        assert!(m("", &l));
        assert!(m("example.com/role in ()", &[("example.com/role", "")]));
    }

    #[test]
    fn syntax_errors_are_bad_requests() {
        for bad in [
            "app=",
            "=x",
            "app in web",
            "app in (a",
            "a b",
            "bad key=1",
            "n>x",
        ] {
            if bad == "app=" {
                // An empty value is valid: `app=` selects app="".
                assert!(LabelSelector::parse(bad).is_ok());
                continue;
            }
            let err = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(err.code, 400, "{bad}");
        }
    }
}
