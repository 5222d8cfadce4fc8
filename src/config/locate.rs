//! Maps field paths (`sources[1].models[0].kind`) to the line they stand on in the YAML text,
//! so every config error can point at its line.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

#[derive(Debug, Default)]
pub struct LineIndex {
    lines: HashMap<String, usize>,
}

impl LineIndex {
    /// Indexes `text`; a text that does not parse yields an empty index (serde reports why).
    pub fn new(text: &str) -> LineIndex {
        let mut builder = Builder::default();
        let _ = Parser::new_from_str(text).load(&mut builder, false);
        LineIndex { lines: builder.lines }
    }

    /// The 1-based line of `path`, or of its nearest ancestor that is indexed.
    pub fn line(&self, path: &str) -> Option<usize> {
        let mut path = path;
        loop {
            if let Some(line) = self.lines.get(path) {
                return Some(*line);
            }
            let cut = path.rfind(['.', '['])?;
            path = &path[..cut];
        }
    }
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
}

impl Builder {
    /// The path of the node that starts now, or `None` when it is a mapping key.
    fn enter_value(&mut self, line: usize) -> Option<String> {
        let path = match self.stack.last_mut() {
            None => String::new(),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                self.lines.entry(p.clone()).or_insert(line);
                p
            }
            Some(Frame::Map { path, key }) => match key.take() {
                Some(k) => {
                    if path.is_empty() {
                        k
                    } else {
                        format!("{path}.{k}")
                    }
                }
                None => return None,
            },
        };
        Some(path)
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        let line = mark.line(); // 1-based already
        match event {
            Event::Scalar(value, ..) => match self.enter_value(line) {
                Some(_) => {}
                None => {
                    if let Some(Frame::Map { path, key }) = self.stack.last_mut() {
                        let full = if path.is_empty() { value.clone() } else { format!("{path}.{value}") };
                        self.lines.entry(full).or_insert(line);
                        *key = Some(value);
                    }
                }
            },
            Event::MappingStart(..) => {
                let path = self.enter_value(line).unwrap_or_default();
                self.stack.push(Frame::Map { path, key: None });
            }
            Event::SequenceStart(..) => {
                let path = self.enter_value(line).unwrap_or_default();
                self.stack.push(Frame::Seq { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            Event::Alias(_) => {
                let _ = self.enter_value(line);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "listen: 127.0.0.1:8080\nsources:\n  - name: a\n    models:\n      - name: m\n        kind: chat\n  - name: b\n";

    #[test]
    fn finds_nested_fields_and_falls_back_to_parents() {
        let index = LineIndex::new(TEXT);
        assert_eq!(index.line("listen"), Some(1));
        assert_eq!(index.line("sources"), Some(2));
        assert_eq!(index.line("sources[0].name"), Some(3));
        assert_eq!(index.line("sources[0].models[0].kind"), Some(6));
        assert_eq!(index.line("sources[1].name"), Some(7));
        assert_eq!(index.line("sources[1].base_url"), Some(7));
        assert_eq!(index.line("nothing"), None);
    }
}
