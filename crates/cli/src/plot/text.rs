//! Text for bitmap charts, rasterized from the embedded font.
//!
//! plotters' own `ab_glyph` text drawing places each glyph at its bounding
//! box rather than at its origin (it drops the left side bearing), so
//! letters sit unevenly ("throughpu t"). [`GlyphText`] wraps a backend and
//! draws text itself with ab_glyph: glyphs at the pen position plus
//! kerning, on a common baseline. Everything else goes to the wrapped
//! backend unchanged. SVG needs none of this: it stores text as text.

use ab_glyph::{point, Font, FontRef, GlyphId, OutlinedGlyph, PxScale, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// A backend whose text is drawn with `font`.
pub struct GlyphText<B> {
    inner: B,
    font: FontRef<'static>,
}

impl<B> GlyphText<B> {
    pub fn new(inner: B, font: FontRef<'static>) -> Self {
        GlyphText { inner, font }
    }

    /// `text`'s glyphs at pixel size `size_px` (ascent to descent), with
    /// the top of the line at y = 0, and the advance width.
    fn layout(&self, text: &str, size_px: f64) -> (Vec<OutlinedGlyph>, f32, f32) {
        let scale = PxScale::from(size_px as f32);
        let font = self.font.as_scaled(scale);
        let mut caret = 0.0f32;
        let mut prev: Option<GlyphId> = None;
        let mut glyphs = Vec::with_capacity(text.len());
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                caret += font.kern(p, id);
            }
            let glyph = id.with_scale_and_position(scale, point(caret, font.ascent()));
            caret += font.h_advance(id);
            prev = Some(id);
            if let Some(g) = self.font.outline_glyph(glyph) {
                glyphs.push(g);
            }
        }
        (glyphs, caret, font.height())
    }
}

impl<B: DrawingBackend> DrawingBackend for GlyphText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (_, width, height) = self.layout(text, style.size());
        Ok((width.ceil() as u32, height.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (glyphs, width, height) = self.layout(text, style.size());
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        let turn = style.transform();
        for g in &glyphs {
            let b = g.px_bounds();
            // The rasterizer's callback cannot fail: keep the first error.
            let mut result = Ok(());
            g.draw(|x, y, coverage| {
                if result.is_err() || coverage <= 0.0 {
                    return;
                }
                let gx = (b.min.x + dx).round() as i32 + x as i32;
                let gy = (b.min.y + dy).round() as i32 + y as i32;
                let (tx, ty) = turn.transform(gx, gy);
                let c = BackendColor {
                    alpha: color.alpha * f64::from(coverage.min(1.0)),
                    rgb: color.rgb,
                };
                result = self.inner.draw_pixel((pos.0 + tx, pos.1 + ty), c);
            });
            result?;
        }
        Ok(())
    }
}
