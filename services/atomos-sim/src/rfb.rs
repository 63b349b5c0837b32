//! A real RFB (VNC) server for a simulated VM's screen, on any byte stream
//! ([`crate::console`] runs it behind a WebSocket).
//!
//! It speaks RFB 3.8, and 3.3 and 3.7 to clients that ask for them (any
//! other 3.x is taken as 3.3, as the protocol says), with security type 1
//! ("None") only, and the Raw encoding only, which every client must
//! accept. The screen is [`WIDTH`] × [`HEIGHT`]: the VM's name and power
//! state in [`TEXT`] on [`BACKGROUND`], drawn with the public-domain 8×8
//! font of the `font8x8` crate. The client's pixel format is honoured
//! (`SetPixelFormat`: 8, 16 or 32 bits per pixel, either byte order, true
//! colour with its maxima and shifts, or a colour map, which the server
//! then fills with its two colours); key, pointer and clipboard events are
//! read and ignored.
//!
//! A non-incremental `FramebufferUpdateRequest` is answered at once with
//! the requested rectangle (clipped to the screen). An incremental one is
//! answered when the screen changes (a boot ending), not before, so that
//! clients that ask again after every update (noVNC) do not spin.

use font8x8::{BASIC_FONTS, UnicodeFonts};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The framebuffer's width, in pixels.
pub const WIDTH: u16 = 640;
/// The framebuffer's height, in pixels.
pub const HEIGHT: u16 = 200;
/// The screen's background colour, RGB.
pub const BACKGROUND: [u8; 3] = [0x12, 0x16, 0x1e];
/// The colour of the screen's text, RGB.
pub const TEXT: [u8; 3] = [0xe8, 0xe8, 0xe0];

/// How often a pending incremental update checks whether the screen changed.
const TICK: Duration = Duration::from_millis(200);
/// Longest clipboard text read from a client; a longer one ends the session.
const MAX_CUT_TEXT: usize = 1 << 20;
/// Longest encoding list read from a client.
const MAX_ENCODINGS: usize = 1024;
/// Left margin of the text, in pixels.
const MARGIN: usize = 16;

/// What a session failed on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RfbError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the VM is gone")]
    VmGone,
}

fn protocol(message: impl Into<String>) -> RfbError {
    RfbError::Protocol(message.into())
}

/// What the screen shows: the VM's name and its power state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Screen {
    pub name: String,
    /// `starting`, `running`, ...
    pub state: String,
}

impl Screen {
    /// One byte per pixel, row by row: 0 for the background, 1 for text.
    pub(crate) fn render(&self) -> Vec<u8> {
        let mut raster = vec![0u8; usize::from(WIDTH) * usize::from(HEIGHT)];
        draw(&mut raster, "AtomOS console (simulated)", 24, 1);
        draw(&mut raster, &self.name, 72, fitting_scale(&self.name));
        draw(
            &mut raster,
            &format!("power: {}", self.state),
            128,
            fitting_scale("power: starting"),
        );
        raster
    }
}

/// 2 when `text` fits the screen at twice the font's size, else 1 (what
/// still does not fit is cut at the right edge).
fn fitting_scale(text: &str) -> usize {
    if MARGIN * 2 + text.chars().count() * 16 <= usize::from(WIDTH) {
        2
    } else {
        1
    }
}

/// Draws `text` with its top at row `top`, each font pixel `scale` pixels
/// square; characters the font lacks are drawn as `?`.
fn draw(raster: &mut [u8], text: &str, top: usize, scale: usize) {
    let (width, height) = (usize::from(WIDTH), usize::from(HEIGHT));
    for (i, c) in text.chars().enumerate() {
        let glyph = BASIC_FONTS
            .get(c)
            .or_else(|| BASIC_FONTS.get('?'))
            .unwrap_or_default();
        let left = MARGIN + i * 8 * scale;
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                // The font's bit 0 is the leftmost pixel.
                if bits & (1 << col) == 0 {
                    continue;
                }
                for dy in 0..scale {
                    for dx in 0..scale {
                        let (x, y) = (left + col * scale + dx, top + row * scale + dy);
                        if x < width && y < height {
                            raster[y * width + x] = 1;
                        }
                    }
                }
            }
        }
    }
}

/// An RFB pixel format (RFC 6143, 7.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PixelFormat {
    pub bits_per_pixel: u8,
    pub depth: u8,
    pub big_endian: bool,
    pub true_colour: bool,
    pub red_max: u16,
    pub green_max: u16,
    pub blue_max: u16,
    pub red_shift: u8,
    pub green_shift: u8,
    pub blue_shift: u8,
}

impl PixelFormat {
    /// The server's own: 32 bits, depth 24, little-endian, 8 bits per
    /// channel, red in the third byte (what most servers announce).
    pub(crate) const DEFAULT: PixelFormat = PixelFormat {
        bits_per_pixel: 32,
        depth: 24,
        big_endian: false,
        true_colour: true,
        red_max: 255,
        green_max: 255,
        blue_max: 255,
        red_shift: 16,
        green_shift: 8,
        blue_shift: 0,
    };

    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0] = self.bits_per_pixel;
        b[1] = self.depth;
        b[2] = u8::from(self.big_endian);
        b[3] = u8::from(self.true_colour);
        b[4..6].copy_from_slice(&self.red_max.to_be_bytes());
        b[6..8].copy_from_slice(&self.green_max.to_be_bytes());
        b[8..10].copy_from_slice(&self.blue_max.to_be_bytes());
        b[10] = self.red_shift;
        b[11] = self.green_shift;
        b[12] = self.blue_shift;
        b
    }

    /// Reads a client's format; bits per pixel other than 8, 16 or 32 are
    /// refused, as are shifts that put a channel outside the pixel.
    pub(crate) fn from_bytes(b: &[u8; 16]) -> Result<PixelFormat, String> {
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let format = PixelFormat {
            bits_per_pixel: b[0],
            depth: b[1],
            big_endian: b[2] != 0,
            true_colour: b[3] != 0,
            red_max: u16_at(4),
            green_max: u16_at(6),
            blue_max: u16_at(8),
            red_shift: b[10],
            green_shift: b[11],
            blue_shift: b[12],
        };
        if !matches!(format.bits_per_pixel, 8 | 16 | 32) {
            return Err(format!(
                "{} bits per pixel (8, 16 or 32 are allowed)",
                format.bits_per_pixel
            ));
        }
        if format.true_colour {
            for (what, shift) in [
                ("red", format.red_shift),
                ("green", format.green_shift),
                ("blue", format.blue_shift),
            ] {
                if shift >= format.bits_per_pixel {
                    return Err(format!(
                        "{what} shift {shift} is outside a {}-bit pixel",
                        format.bits_per_pixel
                    ));
                }
            }
        }
        Ok(format)
    }

    /// The pixel value of `rgb` (or of colour-map entry `index`).
    fn value(&self, rgb: [u8; 3], index: u8) -> u32 {
        if !self.true_colour {
            return u32::from(index);
        }
        let channel = |c: u8, max: u16, shift: u8| {
            let scaled = (u32::from(c) * u32::from(max) + 127) / 255;
            scaled.checked_shl(u32::from(shift)).unwrap_or(0)
        };
        channel(rgb[0], self.red_max, self.red_shift)
            | channel(rgb[1], self.green_max, self.green_shift)
            | channel(rgb[2], self.blue_max, self.blue_shift)
    }

    /// `rgb` (or colour-map entry `index`) as the bytes of one pixel.
    pub(crate) fn encode(&self, rgb: [u8; 3], index: u8) -> Vec<u8> {
        let v = self.value(rgb, index);
        match (self.bits_per_pixel, self.big_endian) {
            (8, _) => vec![v as u8],
            (16, false) => (v as u16).to_le_bytes().to_vec(),
            (16, true) => (v as u16).to_be_bytes().to_vec(),
            (_, false) => v.to_le_bytes().to_vec(),
            (_, true) => v.to_be_bytes().to_vec(),
        }
    }
}

/// The protocol version agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V3_3,
    V3_7,
    V3_8,
}

/// Reads the client's `RFB xxx.yyy\n`.
fn parse_version(raw: &[u8; 12]) -> Result<Version, RfbError> {
    let text = std::str::from_utf8(raw).map_err(|_| protocol("unreadable version"))?;
    let digits = text
        .strip_prefix("RFB ")
        .and_then(|t| t.strip_suffix('\n'))
        .and_then(|t| t.split_once('.'))
        .filter(|(major, minor)| major.len() == 3 && minor.len() == 3)
        .and_then(|(major, minor)| Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?)))
        .ok_or_else(|| protocol(format!("bad version {text:?}")))?;
    match digits {
        (3, 7) => Ok(Version::V3_7),
        // Apple's 3.889 and anything later speak 3.8's handshake.
        (3, m) if m >= 8 => Ok(Version::V3_8),
        (3, _) => Ok(Version::V3_3),
        (major, _) => Err(protocol(format!("RFB {major}.x is not supported"))),
    }
}

/// The server's side of the handshake, up to and including ServerInit.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    name: &str,
) -> Result<(), RfbError> {
    stream.write_all(b"RFB 003.008\n").await?;
    let mut raw = [0u8; 12];
    stream.read_exact(&mut raw).await?;
    let version = parse_version(&raw)?;
    if version == Version::V3_3 {
        // The server decides: None.
        stream.write_all(&1u32.to_be_bytes()).await?;
    } else {
        stream.write_all(&[1, 1]).await?;
        let chosen = stream.read_u8().await?;
        if chosen != 1 {
            if version == Version::V3_8 {
                let reason = format!("security type {chosen} is not offered; use 1 (None)");
                let mut failed = 1u32.to_be_bytes().to_vec();
                failed.extend_from_slice(&(reason.len() as u32).to_be_bytes());
                failed.extend_from_slice(reason.as_bytes());
                stream.write_all(&failed).await?;
            }
            return Err(protocol(format!("the client chose security type {chosen}")));
        }
        if version == Version::V3_8 {
            stream.write_all(&0u32.to_be_bytes()).await?;
        }
    }
    // ClientInit: the shared flag, which changes nothing here.
    stream.read_u8().await?;
    let mut init = Vec::with_capacity(24 + name.len());
    init.extend_from_slice(&WIDTH.to_be_bytes());
    init.extend_from_slice(&HEIGHT.to_be_bytes());
    init.extend_from_slice(&PixelFormat::DEFAULT.to_bytes());
    init.extend_from_slice(&(name.len() as u32).to_be_bytes());
    init.extend_from_slice(name.as_bytes());
    stream.write_all(&init).await?;
    stream.flush().await?;
    Ok(())
}

/// A rectangle of the framebuffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rect {
    x: u16,
    y: u16,
    w: u16,
    h: u16,
}

impl Rect {
    /// The part of `self` on the screen.
    fn clipped(self) -> Rect {
        let x = self.x.min(WIDTH);
        let y = self.y.min(HEIGHT);
        Rect {
            x,
            y,
            w: self.w.min(WIDTH - x),
            h: self.h.min(HEIGHT - y),
        }
    }
}

/// A client message the server acts on; the others are read and dropped.
enum ClientMessage {
    SetPixelFormat(PixelFormat),
    UpdateRequest { incremental: bool, rect: Rect },
}

/// Reads client messages until the client hangs up (`Ok`) or breaks the
/// protocol, handing on those the server acts on.
async fn read_messages<R: AsyncRead + Unpin>(
    mut reader: R,
    to: mpsc::Sender<ClientMessage>,
) -> Result<(), RfbError> {
    loop {
        let kind = match reader.read_u8().await {
            Ok(kind) => kind,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let message = match kind {
            0 => {
                let mut body = [0u8; 19];
                reader.read_exact(&mut body).await?;
                let mut raw = [0u8; 16];
                raw.copy_from_slice(&body[3..]);
                let format = PixelFormat::from_bytes(&raw)
                    .map_err(|e| protocol(format!("SetPixelFormat: {e}")))?;
                Some(ClientMessage::SetPixelFormat(format))
            }
            2 => {
                let mut head = [0u8; 3];
                reader.read_exact(&mut head).await?;
                let count = usize::from(u16::from_be_bytes([head[1], head[2]]));
                if count > MAX_ENCODINGS {
                    return Err(protocol(format!("SetEncodings with {count} encodings")));
                }
                // Raw (0) is all this server sends, and every client takes it.
                let mut encodings = vec![0u8; count * 4];
                reader.read_exact(&mut encodings).await?;
                None
            }
            3 => {
                let mut body = [0u8; 9];
                reader.read_exact(&mut body).await?;
                let at = |i: usize| u16::from_be_bytes([body[i], body[i + 1]]);
                Some(ClientMessage::UpdateRequest {
                    incremental: body[0] != 0,
                    rect: Rect {
                        x: at(1),
                        y: at(3),
                        w: at(5),
                        h: at(7),
                    },
                })
            }
            4 => {
                // KeyEvent: down flag, padding, keysym.
                reader.read_exact(&mut [0u8; 7]).await?;
                None
            }
            5 => {
                // PointerEvent: button mask, x, y.
                reader.read_exact(&mut [0u8; 5]).await?;
                None
            }
            6 => {
                let mut head = [0u8; 7];
                reader.read_exact(&mut head).await?;
                // Negative: the extended clipboard's form, as long as its absolute value.
                let len = i32::from_be_bytes([head[3], head[4], head[5], head[6]]).unsigned_abs()
                    as usize;
                if len > MAX_CUT_TEXT {
                    return Err(protocol(format!("ClientCutText of {len} bytes")));
                }
                let mut text = vec![0u8; len];
                reader.read_exact(&mut text).await?;
                None
            }
            other => return Err(protocol(format!("unknown client message type {other}"))),
        };
        if let Some(message) = message
            && to.send(message).await.is_err()
        {
            return Ok(());
        }
    }
}

/// A FramebufferUpdate of `rect` (clipped) of `raster`, Raw-encoded in
/// `format`.
fn update(raster: &[u8], rect: Rect, format: &PixelFormat) -> Vec<u8> {
    let rect = rect.clipped();
    let pixels = [format.encode(BACKGROUND, 0), format.encode(TEXT, 1)];
    let bytes_per_pixel = pixels[0].len();
    let (w, h) = (usize::from(rect.w), usize::from(rect.h));
    let mut out = Vec::with_capacity(16 + w * h * bytes_per_pixel);
    // FramebufferUpdate, padding, one rectangle (none when it is empty).
    let rects: u16 = if w == 0 || h == 0 { 0 } else { 1 };
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&rects.to_be_bytes());
    if rects == 0 {
        return out;
    }
    for v in [rect.x, rect.y, rect.w, rect.h] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    // Raw.
    out.extend_from_slice(&0i32.to_be_bytes());
    let width = usize::from(WIDTH);
    for y in usize::from(rect.y)..usize::from(rect.y) + h {
        let row = &raster[y * width + usize::from(rect.x)..][..w];
        for &index in row {
            out.extend_from_slice(&pixels[usize::from(index)]);
        }
    }
    out
}

/// SetColourMapEntries: the background as entry 0, the text as entry 1.
fn colour_map() -> Vec<u8> {
    let mut out = vec![1, 0];
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&2u16.to_be_bytes());
    for rgb in [BACKGROUND, TEXT] {
        for c in rgb {
            // 16-bit channels: 0xab becomes 0xabab.
            out.extend_from_slice(&(u16::from(c) * 257).to_be_bytes());
        }
    }
    out
}

/// Serves one client on `stream` until it hangs up, breaks the protocol,
/// or `screen` says the VM is gone (`None`). `name` is the desktop name of
/// ServerInit.
pub(crate) async fn serve<S, F>(mut stream: S, name: &str, screen: F) -> Result<(), RfbError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn() -> Option<Screen>,
{
    handshake(&mut stream, name).await?;
    let (reader, mut writer) = tokio::io::split(stream);
    let (to, mut messages) = mpsc::channel(16);
    let reading = read_messages(reader, to);
    tokio::pin!(reading);
    let mut format = PixelFormat::DEFAULT;
    // What the client was last sent, and an incremental request waiting
    // for the screen to change.
    let mut shown: Option<Screen> = None;
    let mut pending: Option<Rect> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let due = tokio::select! {
            read = &mut reading => return read,
            message = messages.recv() => match message {
                // The reader is done; its result comes next.
                None => continue,
                Some(ClientMessage::SetPixelFormat(new)) => {
                    format = new;
                    shown = None;
                    if !format.true_colour {
                        writer.write_all(&colour_map()).await?;
                        writer.flush().await?;
                    }
                    continue;
                }
                Some(ClientMessage::UpdateRequest { incremental, rect }) => {
                    if incremental {
                        pending = Some(rect);
                        None
                    } else {
                        pending = None;
                        Some(rect)
                    }
                }
            },
            _ = tick.tick() => None,
        };
        let now = screen().ok_or(RfbError::VmGone)?;
        let rect = match due {
            Some(rect) => rect,
            None => match pending {
                Some(rect) if shown.as_ref() != Some(&now) => rect,
                _ => continue,
            },
        };
        pending = None;
        writer
            .write_all(&update(&now.render(), rect, &format))
            .await?;
        writer.flush().await?;
        shown = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen() -> Screen {
        Screen {
            name: "vm-web".into(),
            state: "running".into(),
        }
    }

    #[test]
    fn the_screen_has_text_on_a_background() {
        let raster = screen().render();
        let text = raster.iter().filter(|&&p| p == 1).count();
        assert!(text > 500, "{text} text pixels");
        assert!(text * 10 < raster.len(), "mostly background");
        // The name's first glyph, 'v' at twice the size, starts at the margin.
        let row = |y: usize| &raster[y * usize::from(WIDTH)..][..usize::from(WIDTH)];
        assert!((72..88).any(|y| row(y)[MARGIN..MARGIN + 16].contains(&1)));
        // Long names fall back to the font's own size.
        assert_eq!(fitting_scale(&"x".repeat(38)), 2);
        assert_eq!(fitting_scale(&"x".repeat(39)), 1);
        let long = Screen {
            name: "k0123456789ab-cp-0192c0de0000700080000000000000aa".into(),
            state: "starting".into(),
        };
        assert_ne!(long.render(), raster);
    }

    #[test]
    fn pixels_follow_the_clients_format() {
        let d = PixelFormat::DEFAULT;
        assert_eq!(PixelFormat::from_bytes(&d.to_bytes()), Ok(d));
        assert_eq!(d.encode([0x12, 0x34, 0x56], 0), vec![0x56, 0x34, 0x12, 0]);
        let be = PixelFormat {
            big_endian: true,
            ..d
        };
        assert_eq!(be.encode([0x12, 0x34, 0x56], 0), vec![0, 0x12, 0x34, 0x56]);
        // RGB565, big-endian.
        let rgb565 = PixelFormat {
            bits_per_pixel: 16,
            depth: 16,
            big_endian: true,
            true_colour: true,
            red_max: 31,
            green_max: 63,
            blue_max: 31,
            red_shift: 11,
            green_shift: 5,
            blue_shift: 0,
        };
        assert_eq!(rgb565.encode([255, 255, 255], 0), vec![0xff, 0xff]);
        assert_eq!(rgb565.encode([255, 0, 0], 0), vec![0xf8, 0x00]);
        let le = PixelFormat {
            big_endian: false,
            ..rgb565
        };
        assert_eq!(le.encode([255, 0, 0], 0), vec![0x00, 0xf8]);
        // BGR233.
        let bgr233 = PixelFormat {
            bits_per_pixel: 8,
            depth: 8,
            big_endian: false,
            true_colour: true,
            red_max: 7,
            green_max: 7,
            blue_max: 3,
            red_shift: 0,
            green_shift: 3,
            blue_shift: 6,
        };
        assert_eq!(bgr233.encode([255, 255, 255], 0), vec![0xff]);
        assert_eq!(bgr233.encode([0, 0, 255], 0), vec![0xc0]);
        let map = PixelFormat {
            true_colour: false,
            ..bgr233
        };
        assert_eq!(map.encode(TEXT, 1), vec![1]);
        for bad in [24u8, 0, 64] {
            let raw = PixelFormat {
                bits_per_pixel: bad,
                ..d
            }
            .to_bytes();
            assert!(PixelFormat::from_bytes(&raw).is_err(), "{bad}");
        }
        let shifted = PixelFormat {
            red_shift: 16,
            ..rgb565
        };
        assert!(PixelFormat::from_bytes(&shifted.to_bytes()).is_err());
    }

    #[test]
    fn versions_are_read_as_the_protocol_says() {
        let v = |s: &str| parse_version(s.as_bytes().try_into().unwrap());
        assert_eq!(v("RFB 003.008\n").unwrap(), Version::V3_8);
        assert_eq!(v("RFB 003.889\n").unwrap(), Version::V3_8);
        assert_eq!(v("RFB 003.007\n").unwrap(), Version::V3_7);
        assert_eq!(v("RFB 003.003\n").unwrap(), Version::V3_3);
        assert_eq!(v("RFB 003.005\n").unwrap(), Version::V3_3);
        assert!(v("RFB 004.000\n").is_err());
        assert!(v("GET / HTTP/1").is_err());
    }

    #[test]
    fn updates_are_clipped_raw_rectangles() {
        let raster = screen().render();
        let whole = update(
            &raster,
            Rect {
                x: 0,
                y: 0,
                w: WIDTH,
                h: HEIGHT,
            },
            &PixelFormat::DEFAULT,
        );
        assert_eq!(whole.len(), 4 + 12 + 640 * 200 * 4);
        assert_eq!(&whole[..4], &[0, 0, 0, 1]);
        let clipped = update(
            &raster,
            Rect {
                x: 630,
                y: 190,
                w: 100,
                h: 100,
            },
            &PixelFormat::DEFAULT,
        );
        assert_eq!(&clipped[4..12], &[2, 118, 0, 190, 0, 10, 0, 10]);
        assert_eq!(clipped.len(), 16 + 10 * 10 * 4);
        let outside = update(
            &raster,
            Rect {
                x: 700,
                y: 0,
                w: 5,
                h: 5,
            },
            &PixelFormat::DEFAULT,
        );
        assert_eq!(outside, vec![0, 0, 0, 0]);
    }

    /// A whole session over an in-memory pipe: RFB 3.3, the server's
    /// format, one full update, then an incremental request that waits.
    #[tokio::test]
    async fn a_session_over_a_pipe() {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn(async move { serve(server, "vm-web", || Some(screen())).await });
        let mut version = [0u8; 12];
        client.read_exact(&mut version).await.unwrap();
        assert_eq!(&version, b"RFB 003.008\n");
        client.write_all(b"RFB 003.003\n").await.unwrap();
        assert_eq!(
            client.read_u32().await.unwrap(),
            1,
            "None, decided by the server"
        );
        client.write_u8(1).await.unwrap();
        assert_eq!(client.read_u16().await.unwrap(), WIDTH);
        assert_eq!(client.read_u16().await.unwrap(), HEIGHT);
        let mut format = [0u8; 16];
        client.read_exact(&mut format).await.unwrap();
        assert_eq!(format, PixelFormat::DEFAULT.to_bytes());
        let len = client.read_u32().await.unwrap();
        let mut name = vec![0u8; len as usize];
        client.read_exact(&mut name).await.unwrap();
        assert_eq!(name, b"vm-web");
        // A key, a pointer move, a clipboard, then a request.
        client
            .write_all(&[4, 1, 0, 0, 0, 0, 0, 0x61])
            .await
            .unwrap();
        client.write_all(&[5, 0, 0, 10, 0, 10]).await.unwrap();
        client
            .write_all(&[6, 0, 0, 0, 0, 0, 0, 2, b'h', b'i'])
            .await
            .unwrap();
        client
            .write_all(&[3, 0, 0, 0, 0, 0, 0, 8, 0, 8])
            .await
            .unwrap();
        let mut head = [0u8; 16];
        client.read_exact(&mut head).await.unwrap();
        assert_eq!(&head[..4], &[0, 0, 0, 1]);
        let mut pixels = vec![0u8; 8 * 8 * 4];
        client.read_exact(&mut pixels).await.unwrap();
        // The corner is background.
        assert_eq!(
            &pixels[..4],
            &PixelFormat::DEFAULT.encode(BACKGROUND, 0)[..]
        );
        // Nothing changes: an incremental request is not answered.
        client
            .write_all(&[3, 1, 0, 0, 0, 0, 0, 8, 0, 8])
            .await
            .unwrap();
        let mut byte = [0u8; 1];
        let waited = tokio::time::timeout(TICK * 3, client.read_exact(&mut byte)).await;
        assert!(waited.is_err(), "an unchanged screen sends nothing");
        // An unknown message ends the session.
        client.write_all(&[99]).await.unwrap();
        let end = served.await.unwrap();
        assert!(matches!(end, Err(RfbError::Protocol(_))), "{end:?}");
    }

    #[tokio::test]
    async fn a_security_type_not_offered_is_refused_with_a_reason() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(async move { serve(server, "vm", || Some(screen())).await });
        client.read_exact(&mut [0u8; 12]).await.unwrap();
        client.write_all(b"RFB 003.008\n").await.unwrap();
        let mut offered = [0u8; 2];
        client.read_exact(&mut offered).await.unwrap();
        assert_eq!(offered, [1, 1]);
        client.write_u8(2).await.unwrap();
        assert_eq!(client.read_u32().await.unwrap(), 1, "failed");
        let len = client.read_u32().await.unwrap();
        let mut reason = vec![0u8; len as usize];
        client.read_exact(&mut reason).await.unwrap();
        assert!(String::from_utf8(reason).unwrap().contains("None"));
        assert!(served.await.unwrap().is_err());
    }
}
